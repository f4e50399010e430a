//! `data fetch` against a local HTTP server and a `file://` mirror (no network needed): files
//! land under the data directory when their sha256 matches, corrupt downloads are discarded,
//! files already present are neither downloaded again nor overwritten, and an unreachable
//! server is a clear error naming the URL.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use attend_train::data::fetch::{
    fetch, named, names, sha256_hex, FetchError, FileOutcome, RemoteDataset, RemoteFile, Source,
};

/// Serves `files` (path → body) over HTTP/1.1 on a free port; counts requests.
fn serve(files: Vec<(String, Vec<u8>)>) -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let hits = Arc::new(AtomicUsize::new(0));
    let counter = hits.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            counter.fetch_add(1, Ordering::SeqCst);
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut request = String::new();
            reader.read_line(&mut request).unwrap();
            loop {
                let mut header = String::new();
                if reader.read_line(&mut header).unwrap() == 0 || header == "\r\n" {
                    break;
                }
            }
            let path = request.split_whitespace().nth(1).unwrap_or("/").trim_start_matches('/').to_string();
            match files.iter().find(|f| f.0 == path) {
                Some((_, body)) => {
                    write!(stream, "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n", body.len())
                        .unwrap();
                    stream.write_all(body).unwrap();
                }
                None => {
                    write!(stream, "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n").unwrap()
                }
            }
        }
    });
    (base, hits)
}

/// A generated two-file dataset (one gzip-named, bytes as they would be stored) and its bodies.
fn dataset(url_base: &str) -> (RemoteDataset, Vec<(String, Vec<u8>)>) {
    let bodies = vec![
        (
            "toy/train.txt".to_string(),
            (0..5000).map(|i| format!("line {i} of the toy corpus\n")).collect::<String>().into_bytes(),
        ),
        ("toy/valid.txt.gz".to_string(), (0..=255u8).cycle().take(70_000).collect::<Vec<u8>>()),
    ];
    let files = bodies
        .iter()
        .map(|(path, body)| RemoteFile {
            path: path.clone(),
            url: format!("{url_base}/{path}"),
            sha256: sha256_hex(body),
        })
        .collect();
    (RemoteDataset { name: "toy".into(), files, about: "generated".into() }, bodies)
}

fn quiet() -> impl FnMut(&str) {
    |_: &str| {}
}

#[test]
fn fetched_files_land_in_the_data_directory_with_their_checksums_and_are_not_fetched_twice() {
    let dir = tempfile::tempdir().unwrap();
    let (_, bodies) = dataset("unused");
    let (base, hits) = serve(bodies.clone());
    let (toy, _) = dataset(&base);
    let outcomes = fetch(&toy, dir.path(), &Source::Origin, &mut quiet()).unwrap();
    assert_eq!(outcomes.len(), 2);
    for ((path, outcome), (rel, body)) in outcomes.iter().zip(&bodies) {
        assert_eq!(path, &dir.path().join(rel));
        assert_eq!(outcome, &FileOutcome::Downloaded { bytes: body.len() as u64 });
        assert_eq!(&std::fs::read(path).unwrap(), body);
    }
    assert_eq!(hits.load(Ordering::SeqCst), 2);
    let again = fetch(&toy, dir.path(), &Source::Origin, &mut quiet()).unwrap();
    assert!(again.iter().all(|(_, o)| *o == FileOutcome::AlreadyPresent));
    assert_eq!(hits.load(Ordering::SeqCst), 2, "present files must not be downloaded again");
}

#[test]
fn a_mirror_serves_the_data_directory_layout_over_http_and_from_files() {
    let (_, bodies) = dataset("unused");
    let (base, _) = serve(bodies.clone());
    let (toy, _) = dataset("http://127.0.0.1:9/never-used");
    let http_dir = tempfile::tempdir().unwrap();
    fetch(&toy, http_dir.path(), &Source::Mirror(base), &mut quiet()).unwrap();
    let file_dir = tempfile::tempdir().unwrap();
    let mirror = format!("file://{}", http_dir.path().display());
    fetch(&toy, file_dir.path(), &Source::Mirror(mirror), &mut quiet()).unwrap();
    for (rel, body) in &bodies {
        assert_eq!(&std::fs::read(file_dir.path().join(rel)).unwrap(), body);
    }
}

#[test]
fn a_download_with_the_wrong_checksum_is_discarded_and_named() {
    let dir = tempfile::tempdir().unwrap();
    let (_, mut bodies) = dataset("unused");
    let (toy, _) = dataset("http://placeholder");
    bodies[0].1.push(b'!'); // the server sends one byte more than the manifest expects
    let (base, _) = serve(bodies);
    let err = fetch(&toy, dir.path(), &Source::Mirror(base.clone()), &mut quiet()).unwrap_err();
    let message = err.to_string();
    assert!(matches!(err, FetchError::Checksum { .. }), "{message}");
    assert!(message.contains(&format!("{base}/toy/train.txt")) && message.contains(&toy.files[0].sha256), "{message}");
    let left: Vec<_> = std::fs::read_dir(dir.path().join("toy")).unwrap().collect();
    assert!(left.is_empty(), "neither the file nor its .part may remain: {left:?}");
}

#[test]
fn a_present_file_with_another_checksum_is_reported_and_left_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let (toy, _) = dataset("http://127.0.0.1:9");
    let path = dir.path().join("toy/train.txt");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, b"my own edits").unwrap();
    let err = fetch(&toy, dir.path(), &Source::Origin, &mut quiet()).unwrap_err();
    assert!(matches!(err, FetchError::ExistingDiffers { .. }), "{err}");
    assert!(err.to_string().contains(&path.display().to_string()));
    assert_eq!(std::fs::read(&path).unwrap(), b"my own edits");
}

#[test]
fn an_unreachable_server_is_an_error_naming_the_url_and_the_network() {
    let port = {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    }; // closed again: connections are refused
    let dir = tempfile::tempdir().unwrap();
    let (toy, _) = dataset(&format!("http://127.0.0.1:{port}"));
    let err = fetch(&toy, dir.path(), &Source::Origin, &mut quiet()).unwrap_err();
    let message = err.to_string();
    assert!(matches!(err, FetchError::Network { .. }), "{message}");
    assert!(message.contains(&format!("127.0.0.1:{port}/toy/train.txt")) && message.contains("network"), "{message}");
    assert!(!dir.path().join("toy/train.txt").exists());
}

#[test]
fn a_missing_file_on_the_server_is_an_http_error_naming_the_url() {
    let (base, _) = serve(Vec::new());
    let dir = tempfile::tempdir().unwrap();
    let (toy, _) = dataset(&base);
    let message = fetch(&toy, dir.path(), &Source::Origin, &mut quiet()).unwrap_err().to_string();
    assert!(message.contains("404") && message.contains("/toy/train.txt"), "{message}");
}

#[test]
fn the_manifest_names_every_file_the_loaders_read_with_a_sha256() {
    assert_eq!(names(), ["tiny-shakespeare", "ptb", "multi30k"]);
    for name in names() {
        let set = named(name).unwrap();
        for f in &set.files {
            assert_eq!(f.sha256.len(), 64, "{}", f.path);
            assert!(f.sha256.bytes().all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()));
            assert!(
                f.url.starts_with("https://raw.githubusercontent.com/")
                    && f.url.ends_with(Path::new(&f.path).file_name().unwrap().to_str().unwrap())
            );
        }
    }
    let paths = |n| named(n).unwrap().files.into_iter().map(|f| f.path).collect::<Vec<_>>();
    assert_eq!(paths("tiny-shakespeare"), ["tinyshakespeare/input.txt"]);
    assert!(paths("ptb").contains(&"ptb/ptb.test.txt.gz".to_string()));
    for split in ["train", "val", "test_2016_flickr"] {
        for lang in ["de", "en"] {
            assert!(paths("multi30k").contains(&format!("multi30k/{split}.{lang}.gz")));
        }
    }
    let err = named("wikitext-2").unwrap_err().to_string();
    assert!(err.contains("wikitext-2") && err.contains("multi30k"), "{err}");
}
