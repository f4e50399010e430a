//! Reading training text and counting its pre-tokenized words.
//!
//! Files (plain or `.gz`) are streamed in chunks that end at a line break; worker threads
//! validate UTF-8, pre-tokenize each line (with its line ending, as HuggingFace's trainer
//! reads files) and count words in maps of their own, merged at the end. Memory is the
//! distinct words plus a few chunks in flight, not the corpus.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Mutex};

use flate2::read::MultiGzDecoder;
use indicatif::{ProgressBar, ProgressStyle};
use rustc_hash::FxHashMap;

use crate::error::{BpeError, Result};
use crate::pretokenize::for_each_piece;

/// Each distinct pre-tokenized word (its bytes) with its number of occurrences.
pub type WordCounts = FxHashMap<Box<[u8]>, u64>;

/// Target size of one chunk of input handed to a worker.
const CHUNK_BYTES: usize = 1 << 20;

/// A piece of one input file that ends at a line break (or at the end of the file).
struct Chunk {
    file: usize,
    /// The 1-based line number of the chunk's first line.
    first_line: u64,
    bytes: Vec<u8>,
}

/// Adds the words of `text`, line by line, to `counts`.
pub fn count_words(text: &str, counts: &mut WordCounts) {
    for line in text.split_inclusive('\n') {
        for_each_piece(line, |piece| {
            if let Some(c) = counts.get_mut(piece.as_bytes()) {
                *c += 1;
            } else {
                counts.insert(piece.as_bytes().into(), 1);
            }
        });
    }
}

/// Counts the words of every file, in parallel.
pub fn count_words_in_files(paths: &[PathBuf], show_progress: bool) -> Result<WordCounts> {
    let workers = std::thread::available_parallelism().map_or(2, |n| n.get());
    count_in_chunks(paths, show_progress, CHUNK_BYTES, workers)
}

/// [`count_words_in_files`] with chunks of about `chunk_bytes` and `workers` counting threads
/// (the tests take small chunks, so that a small file spans many).
fn count_in_chunks(paths: &[PathBuf], show_progress: bool, chunk_bytes: usize, workers: usize) -> Result<WordCounts> {
    if paths.is_empty() {
        return Err(BpeError::NoInputs);
    }
    let total: u64 = paths
        .iter()
        .map(|p| std::fs::metadata(p).map(|m| m.len()).map_err(|e| BpeError::io(p, e)))
        .sum::<Result<u64>>()?;
    let progress = if show_progress { ProgressBar::new(total) } else { ProgressBar::hidden() };
    progress.set_style(
        ProgressStyle::with_template("counting words {bar:40} {bytes}/{total_bytes} {eta}").expect("valid template"),
    );
    let (send, receive) = mpsc::sync_channel::<Chunk>(2 * workers);
    let receive = Mutex::new(receive);
    let failed = AtomicBool::new(false);

    let (read_result, counted) = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..workers).map(|_| scope.spawn(|| count_chunks(&receive, paths, &failed))).collect();
        let read_result = read_chunks(paths, chunk_bytes, &send, &failed, &progress);
        drop(send);
        let counted: Vec<Result<WordCounts>> =
            handles.into_iter().map(|h| h.join().expect("worker panicked")).collect();
        (read_result, counted)
    });
    progress.finish_and_clear();
    read_result?;
    let mut maps = counted.into_iter().collect::<Result<Vec<_>>>()?;
    maps.sort_by_key(|m| std::cmp::Reverse(m.len()));
    let mut merged = maps.remove(0);
    for map in maps {
        for (word, count) in map {
            *merged.entry(word).or_insert(0) += count;
        }
    }
    Ok(merged)
}

/// A worker: takes chunks until the channel closes, counting their words.
fn count_chunks(receive: &Mutex<mpsc::Receiver<Chunk>>, paths: &[PathBuf], failed: &AtomicBool) -> Result<WordCounts> {
    let mut counts = WordCounts::default();
    loop {
        let chunk = match receive.lock().expect("receiver lock").recv() {
            Ok(chunk) => chunk,
            Err(_) => return Ok(counts),
        };
        match std::str::from_utf8(&chunk.bytes) {
            Ok(text) => count_words(text, &mut counts),
            Err(e) => {
                failed.store(true, Ordering::Relaxed);
                let before = &chunk.bytes[..e.valid_up_to()];
                let line = chunk.first_line + before.iter().filter(|&&b| b == b'\n').count() as u64;
                return Err(BpeError::InvalidUtf8 { path: paths[chunk.file].clone(), line });
            }
        }
    }
}

/// The reader: streams every file as line-aligned chunks of about `chunk_bytes` into `send`.
fn read_chunks(
    paths: &[PathBuf],
    chunk_bytes: usize,
    send: &mpsc::SyncSender<Chunk>,
    failed: &AtomicBool,
    progress: &ProgressBar,
) -> Result<()> {
    for (file, path) in paths.iter().enumerate() {
        let mut reader = open(path, progress)?;
        let mut carry: Vec<u8> = Vec::new();
        let mut line = 1u64;
        let mut any = false;
        loop {
            if failed.load(Ordering::Relaxed) {
                return Ok(());
            }
            let mut bytes = std::mem::take(&mut carry);
            let start = bytes.len();
            bytes.resize(start + chunk_bytes, 0);
            let n = read_full(&mut reader, &mut bytes[start..]).map_err(|e| BpeError::io(path, e))?;
            bytes.truncate(start + n);
            let at_end = n == 0;
            if !at_end {
                any = true;
                // Hand over whole lines; keep the unfinished last line for the next chunk.
                match bytes.iter().rposition(|&b| b == b'\n') {
                    Some(last) => carry = bytes.split_off(last + 1),
                    None => {
                        carry = bytes;
                        continue;
                    }
                }
            }
            if !bytes.is_empty() {
                let lines = bytes.iter().filter(|&&b| b == b'\n').count() as u64;
                let chunk = Chunk { file, first_line: line, bytes };
                line += lines;
                if send.send(chunk).is_err() {
                    return Ok(());
                }
            }
            if at_end {
                break;
            }
        }
        if !any {
            return Err(BpeError::EmptyInput { path: path.clone() });
        }
    }
    Ok(())
}

/// Opens a file for reading, decompressing `.gz`; progress counts the bytes on disk.
fn open(path: &Path, progress: &ProgressBar) -> Result<Box<dyn Read>> {
    let file = std::fs::File::open(path).map_err(|e| BpeError::io(path, e))?;
    let counted = progress.wrap_read(file);
    if path.extension().is_some_and(|e| e == "gz") {
        Ok(Box::new(MultiGzDecoder::new(std::io::BufReader::new(counted))))
    } else {
        Ok(Box::new(counted))
    }
}

/// Reads until `buf` is full or the input ends; returns the number of bytes read.
fn read_full(reader: &mut dyn Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match reader.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(filled)
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    /// Lines of generated words, every tenth longer than the tests' 64-byte chunks, each
    /// ending in a space (so that a chunk cut before a line break, not after it, changes the
    /// pieces: `" \n"` is one), the last without a line break.
    fn generated_text(seed: u64, lines: usize) -> String {
        let words = ["the", "ünd", "Ωmega", "42", "don't", "日本", "x", "!?"];
        let mut next = crate::test_rng::xorshift(seed);
        let mut text = String::new();
        for line in 0..lines {
            let n = if line % 10 == 3 { 30 } else { next() % 6 };
            for _ in 0..n {
                text.push_str(words[(next() % words.len() as u64) as usize]);
                text.push(' ');
            }
            text.push('\n');
        }
        text.push_str("the last line, unbroken");
        text
    }

    /// Writes `texts` as files in `dir`, the second one gzipped.
    fn write_files(dir: &Path, texts: &[Vec<u8>]) -> Vec<PathBuf> {
        let mut paths = Vec::new();
        for (i, text) in texts.iter().enumerate() {
            let path = dir.join(if i == 1 { format!("{i}.txt.gz") } else { format!("{i}.txt") });
            if i == 1 {
                let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
                gz.write_all(text).unwrap();
                std::fs::write(&path, gz.finish().unwrap()).unwrap();
            } else {
                std::fs::write(&path, text).unwrap();
            }
            paths.push(path);
        }
        paths
    }

    #[test]
    fn files_read_in_many_small_chunks_count_as_their_whole_texts_do() {
        let dir = tempfile::tempdir().unwrap();
        let texts = [generated_text(1, 400), generated_text(2, 300), generated_text(3, 50)];
        let paths = write_files(dir.path(), &texts.clone().map(String::into_bytes));
        let mut expected = WordCounts::default();
        for text in &texts {
            count_words(text, &mut expected);
        }
        // 64-byte chunks: hundreds a file, shared among three workers, whose maps are merged.
        assert_eq!(count_in_chunks(&paths, false, 64, 3).unwrap(), expected);
        assert_eq!(count_words_in_files(&paths, false).unwrap(), expected);
    }

    #[test]
    fn invalid_utf8_in_a_later_chunk_names_its_file_and_line() {
        let dir = tempfile::tempdir().unwrap();
        let mut damaged = generated_text(4, 120).into_bytes();
        // The start of line 90 (1-based): after the 89th line break.
        let at = damaged.iter().enumerate().filter(|&(_, &b)| b == b'\n').nth(88).unwrap().0 + 1;
        damaged.insert(at, 0xFF);
        let paths = write_files(dir.path(), &[generated_text(5, 100).into_bytes(), damaged]);
        match count_in_chunks(&paths, false, 64, 2) {
            Err(BpeError::InvalidUtf8 { path, line }) => assert_eq!((path, line), (paths[1].clone(), 90)),
            other => panic!("expected invalid UTF-8 on line 90 of the second file, got {other:?}"),
        }
    }

    /// A reader that fails once with `error`, then gives `data` three bytes at a time.
    struct Flaky {
        error: Option<std::io::ErrorKind>,
        data: &'static [u8],
    }

    impl Read for Flaky {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            if let Some(kind) = self.error.take() {
                return Err(kind.into());
            }
            let n = buf.len().min(self.data.len()).min(3);
            buf[..n].copy_from_slice(&self.data[..n]);
            self.data = &self.data[n..];
            Ok(n)
        }
    }

    #[test]
    fn read_full_retries_an_interrupted_read_and_passes_on_any_other_error() {
        let mut buf = [0u8; 16];
        let mut interrupted = Flaky { error: Some(std::io::ErrorKind::Interrupted), data: b"0123456789" };
        assert_eq!(read_full(&mut interrupted, &mut buf).unwrap(), 10);
        assert_eq!(&buf[..10], b"0123456789");
        let mut failing = Flaky { error: Some(std::io::ErrorKind::Other), data: b"0123456789" };
        assert_eq!(read_full(&mut failing, &mut buf).unwrap_err().kind(), std::io::ErrorKind::Other);
    }

    #[test]
    fn counts_words_per_line_with_line_endings() {
        let mut counts = WordCounts::default();
        count_words("a b\na b\n", &mut counts);
        assert_eq!(counts.get(b"a".as_slice()), Some(&2));
        assert_eq!(counts.get(b" b".as_slice()), Some(&2));
        assert_eq!(counts.get(b"\n".as_slice()), Some(&2));
        assert_eq!(counts.len(), 3);
    }
}
