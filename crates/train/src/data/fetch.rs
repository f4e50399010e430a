//! `data fetch NAME`: downloads a named public dataset into the data directory, with the file
//! names the loaders read, and checks the sha256 of every file against the manifest of
//! `../shared/data/README.md` (the files are stored exactly as their source repositories
//! serve them, gzip included).
//!
//! Each file is streamed into `NAME.part` while its sha256 is computed, and renamed into place
//! only when the checksum matches, so an interrupted or corrupt download never leaves a file
//! the loaders would read. A file already present with the right checksum is not downloaded
//! again; one present with another checksum is left alone and reported (nothing saved is
//! overwritten). `Source::Mirror` fetches the same relative paths from another base URL
//! (`http://`, `https://` or `file://`): a local mirror, and how the tests exercise the
//! download path without the network.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use sha2::{Digest, Sha256};

/// One file of a dataset.
#[derive(Clone, Debug)]
pub struct RemoteFile {
    /// Path under the data directory (and under a mirror's base URL).
    pub path: String,
    /// Where the file's source repository serves it.
    pub url: String,
    /// Lowercase hex sha256 of the file as stored.
    pub sha256: String,
}

/// A named dataset: its files and where they come from.
#[derive(Clone, Debug)]
pub struct RemoteDataset {
    pub name: String,
    pub files: Vec<RemoteFile>,
    /// Source and license, printed after a fetch.
    pub about: String,
}

/// Where to download from.
#[derive(Clone, Debug)]
pub enum Source {
    /// Each file's own URL (the source repositories, pinned to a commit).
    Origin,
    /// `base/path` for each file: an `http://`, `https://` or `file://` base.
    Mirror(String),
}

/// What happened to each file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FileOutcome {
    Downloaded { bytes: u64 },
    AlreadyPresent,
}

#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    #[error("no dataset named {0:?}; `data fetch` knows: {known}", known = names().join(", "))]
    Unknown(String),
    #[error("{url}: {message} (no network? `data fetch` needs one; alternatively copy the files into the data directory, or pass --mirror)")]
    Network { url: String, message: String },
    #[error("{url}: sha256 {actual}, expected {expected}; the download was discarded")]
    Checksum { url: String, expected: String, actual: String },
    #[error("{path} exists with sha256 {actual}, not the expected {expected}; it was left untouched (move it away to fetch it again)")]
    ExistingDiffers { path: PathBuf, expected: String, actual: String },
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
}

const SHAKESPEARE: &str =
    "https://raw.githubusercontent.com/karpathy/char-rnn/6f9487a6fe5b420b7ca9afb0d7c078e37c1d1b4e/data/tinyshakespeare";
const PTB: &str =
    "https://raw.githubusercontent.com/Lasagne/Recipes/d616658de38e69f5036b236b6acbaf6e465ec9bd/examples/penntree";
const MULTI30K: &str =
    "https://raw.githubusercontent.com/multi30k/dataset/a3d2e0d26b56f3846f66a952536ffed4e401d05a/data/task1/raw";

/// One dataset of the manifest: (dataset, directory, base URL, [(file, sha256)], about).
type Entry = (&'static str, &'static str, &'static str, &'static [(&'static str, &'static str)], &'static str);

/// The manifest of `../shared/data/README.md`.
const MANIFEST: &[Entry] = &[
    (
        "tiny-shakespeare",
        "tinyshakespeare",
        SHAKESPEARE,
        &[("input.txt", "86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed")],
        "karpathy/char-rnn (the file nanoGPT's prepare.py downloads); Shakespeare's text, public domain",
    ),
    (
        "ptb",
        "ptb",
        PTB,
        &[
            ("ptb.train.txt.gz", "270e0c1de69c076ee9be3fb389e0a6a3c849a03664d9a05550c6a98afd63bf4e"),
            ("ptb.valid.txt.gz", "2c532ce295a2a82b986b0ab85f39422d4c1a6211cc78d9d4c3b647eb827d56a5"),
            ("ptb.test.txt.gz", "c186c58140c532dcf89939356c67f0ceaad98baac97c3eab733c14c9ce427ffa"),
        ],
        "Mikolov's preprocessed Penn Treebank via Lasagne/Recipes; derived from the LDC Penn Treebank, for research use",
    ),
    (
        "multi30k",
        "multi30k",
        MULTI30K,
        &[
            ("train.de.gz", "726e39b2fa9eb9ffb6dc763fb35a179f80fae06ffc5d28b6ace5faa883de28a6"),
            ("train.en.gz", "d79cfa999dd4c51d2cb42499b6796d5a882c3a8a961923c25a898c90f8bbd56f"),
            ("val.de.gz", "f0cba2f995189cf5770f29a8a9a537a3ad3f51657ad873405082ff6863a5e75a"),
            ("val.en.gz", "14f7d25ddd868909a9213e361768460edcacdd6ab9d1e77b92560dc10c10dc28"),
            ("test_2016_flickr.de.gz", "9204244e408ccb38d2a55cfcd344df15005fc42a07a6e55ca6c52b6ababb8cc8"),
            ("test_2016_flickr.en.gz", "611d361c6334bc7246101d48097c13cf5c4413c5befc793cc629934359d532d9"),
            ("test_2017_flickr.de.gz", "a2c89666db00c495cd8513b9d708d5a3acc205d7de312ef2bf5fb7ebc1540aee"),
            ("test_2017_flickr.en.gz", "76a444ee25172e72695cddb13ae4a3bda59430617be88e0bb46b60504f054074"),
            ("test_2017_mscoco.de.gz", "799e4854c25d601cb6cb6be29eabe5667734c61ace2f495e03e429031a0bc338"),
            ("test_2017_mscoco.en.gz", "aab300bfb4427697987e02cd0aacd44bfe8aa50456231b6474c08038bbed2b58"),
            ("test_2018_flickr.de.gz", "ddd0130c7d97482dc5197a02141dae8dd79f20f03586c480d675c09a32daf608"),
            ("test_2018_flickr.en.gz", "ef4f4844037d4c5dea75c9a8ed5fd78905967a26f67c255e230cc9780032654d"),
        ],
        "multi30k/dataset task 1 (en, de); for non-commercial research and education, cite Elliott et al. 2016",
    ),
];

/// The names `data fetch` knows.
pub fn names() -> Vec<&'static str> {
    MANIFEST.iter().map(|m| m.0).collect()
}

/// The named dataset's manifest.
pub fn named(name: &str) -> Result<RemoteDataset, FetchError> {
    let (name, dir, base, files, about) =
        MANIFEST.iter().find(|m| m.0 == name).ok_or_else(|| FetchError::Unknown(name.into()))?;
    Ok(RemoteDataset {
        name: name.to_string(),
        files: files
            .iter()
            .map(|(file, sha)| RemoteFile {
                path: format!("{dir}/{file}"),
                url: format!("{base}/{file}"),
                sha256: sha.to_string(),
            })
            .collect(),
        about: about.to_string(),
    })
}

/// Downloads every file of `dataset` missing from `data_dir` and checks every checksum;
/// `progress` hears one line per file.
pub fn fetch(
    dataset: &RemoteDataset,
    data_dir: &Path,
    source: &Source,
    progress: &mut dyn FnMut(&str),
) -> Result<Vec<(PathBuf, FileOutcome)>, FetchError> {
    let mut out = Vec::new();
    for file in &dataset.files {
        let target = data_dir.join(&file.path);
        if target.exists() {
            let actual = sha256_of_file(&target)?;
            if actual != file.sha256 {
                return Err(FetchError::ExistingDiffers { path: target, expected: file.sha256.clone(), actual });
            }
            progress(&format!("{}: present, sha256 ok", target.display()));
            out.push((target, FileOutcome::AlreadyPresent));
            continue;
        }
        let url = match source {
            Source::Origin => file.url.clone(),
            Source::Mirror(base) => format!("{}/{}", base.trim_end_matches('/'), file.path),
        };
        progress(&format!("{}: downloading {url}", target.display()));
        let bytes = download_verified(&url, &file.sha256, &target)?;
        progress(&format!("{}: {bytes} bytes, sha256 ok", target.display()));
        out.push((target, FileOutcome::Downloaded { bytes }));
    }
    Ok(out)
}

/// Streams `url` into `target.part`, then renames it to `target` if its sha256 is `expected`.
fn download_verified(url: &str, expected: &str, target: &Path) -> Result<u64, FetchError> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| FetchError::Io { path, source }
    };
    let parent = target.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(parent).map_err(io(parent))?;
    let part = target.with_file_name(format!("{}.part", target.file_name().unwrap_or_default().to_string_lossy()));
    let mut reader = open(url)?;
    let result = (|| {
        let mut file = std::fs::File::create(&part).map_err(io(&part))?;
        let mut hasher = Sha256::new();
        let mut buffer = vec![0u8; 1 << 16];
        let mut total = 0u64;
        loop {
            let n = reader
                .read(&mut buffer)
                .map_err(|e| FetchError::Network { url: url.into(), message: e.to_string() })?;
            if n == 0 {
                break;
            }
            hasher.update(&buffer[..n]);
            file.write_all(&buffer[..n]).map_err(io(&part))?;
            total += n as u64;
        }
        file.sync_all().map_err(io(&part))?;
        let actual = hex(&hasher.finalize());
        if actual != expected {
            return Err(FetchError::Checksum { url: url.into(), expected: expected.into(), actual });
        }
        std::fs::rename(&part, target).map_err(io(target))?;
        Ok(total)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&part);
    }
    result
}

/// A reader of `url`'s body: `file://` from disk, `http(s)://` by ureq (rustls).
fn open(url: &str) -> Result<Box<dyn Read + Send>, FetchError> {
    let network = |message: String| FetchError::Network { url: url.into(), message };
    if let Some(path) = url.strip_prefix("file://") {
        let file = std::fs::File::open(path).map_err(|e| network(e.to_string()))?;
        return Ok(Box::new(file));
    }
    if !(url.starts_with("http://") || url.starts_with("https://")) {
        return Err(network("not an http://, https:// or file:// URL".into()));
    }
    let agent = ureq::AgentBuilder::new()
        .timeout_connect(Duration::from_secs(20))
        .timeout_read(Duration::from_secs(60))
        .build();
    match agent.get(url).call() {
        Ok(response) => Ok(Box::new(response.into_reader())),
        Err(ureq::Error::Status(code, response)) => Err(network(format!("HTTP {code} {}", response.status_text()))),
        Err(e) => Err(network(e.to_string())),
    }
}

/// Lowercase hex sha256 of a file.
pub fn sha256_of_file(path: &Path) -> Result<String, FetchError> {
    let io = |source| FetchError::Io { path: path.to_path_buf(), source };
    let mut file = std::fs::File::open(path).map_err(io)?;
    let mut hasher = Sha256::new();
    std::io::copy(&mut file, &mut hasher).map_err(io)?;
    Ok(hex(&hasher.finalize()))
}

/// Lowercase hex sha256 of bytes.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
