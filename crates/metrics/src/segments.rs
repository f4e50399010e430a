//! Hypotheses and references as sacreBLEU's command line reads them: hypotheses from one
//! stream (stdin), one reference file per reference stream (plain or gzip), each line split on
//! `\n` and right-stripped, and every reference file with exactly one line per hypothesis.

use std::io::Read;
use std::path::{Path, PathBuf};

use crate::lines::{read_lines, read_lines_from};
use crate::text::py_rstrip;
use crate::MetricsError;

/// Hypotheses from `hyps` (named `<stdin>` in errors) and one stream per reference file.
pub fn read_segments(hyps: impl Read, ref_paths: &[PathBuf]) -> Result<(Vec<String>, Vec<Vec<String>>), MetricsError> {
    let hyps = strip(read_lines_from(hyps, Path::new("<stdin>"))?);
    if hyps.is_empty() {
        return Err(MetricsError::NoHypotheses);
    }
    let mut refs = Vec::with_capacity(ref_paths.len());
    for path in ref_paths {
        let lines = strip(read_lines(path)?);
        if lines.len() != hyps.len() {
            return Err(MetricsError::ReferenceLineCount { path: path.clone(), lines: lines.len(), hyps: hyps.len() });
        }
        refs.push(lines);
    }
    Ok((hyps, refs))
}

fn strip(lines: Vec<String>) -> Vec<String> {
    lines
        .into_iter()
        .map(|mut line| {
            line.truncate(py_rstrip(&line).len());
            line
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_count_mismatch_names_the_reference_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ref.txt");
        std::fs::write(&path, "a\nb\n").unwrap();
        let err = read_segments("only one\n".as_bytes(), std::slice::from_ref(&path)).unwrap_err().to_string();
        assert!(err.contains("ref.txt has 2 lines but stdin has 1 hypotheses"), "{err}");
    }

    #[test]
    fn lines_are_right_stripped_like_sacrebleus_command_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ref.txt");
        std::fs::write(&path, "x y \r\n").unwrap();
        let (hyps, refs) = read_segments(" a b\t\n".as_bytes(), &[path]).unwrap();
        assert_eq!((hyps, refs), (vec![" a b".to_string()], vec![vec!["x y".to_string()]]));
    }

    #[test]
    fn invalid_utf8_on_stdin_names_the_line() {
        let input: &[u8] = b"ok\nfine\n\xff\n";
        let err = read_segments(input, &[]).unwrap_err().to_string();
        assert_eq!(err, "<stdin>:3: invalid UTF-8");
    }

    #[test]
    fn empty_stdin_is_refused() {
        let err = read_segments("".as_bytes(), &[]).unwrap_err().to_string();
        assert!(err.starts_with("no hypotheses: stdin is empty"), "{err}");
    }
}
