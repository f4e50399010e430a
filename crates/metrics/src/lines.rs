//! Reading text files line by line, gzip or plain, with errors that name the file and line.
//!
//! Lines are split on `\n` only (as sacreBLEU opens files, `newline="\n"`); the `\n` is
//! removed and nothing else, so a `\r` stays part of its line. A final line without `\n`
//! counts; an empty file has no lines.

use std::io::Read;
use std::path::Path;

use flate2::read::MultiGzDecoder;

use crate::MetricsError;

/// The lines of the file at `path`, decompressed first if it starts with the gzip magic bytes.
pub fn read_lines(path: &Path) -> Result<Vec<String>, MetricsError> {
    let io_err = |source| MetricsError::Io { path: path.to_path_buf(), source };
    let raw = std::fs::read(path).map_err(io_err)?;
    let bytes = if raw.starts_with(&[0x1f, 0x8b]) {
        let mut out = Vec::new();
        MultiGzDecoder::new(raw.as_slice()).read_to_end(&mut out).map_err(io_err)?;
        out
    } else {
        raw
    };
    split_lines(bytes, path)
}

/// The lines of everything `reader` yields; `name` (e.g. `<stdin>`) is used in errors.
pub fn read_lines_from(mut reader: impl Read, name: &Path) -> Result<Vec<String>, MetricsError> {
    let mut bytes = Vec::new();
    reader.read_to_end(&mut bytes).map_err(|source| MetricsError::Io { path: name.to_path_buf(), source })?;
    split_lines(bytes, name)
}

/// Splits `bytes` on `\n`, checking that each line is UTF-8.
///
/// Example: `b"a\nb"` → `["a", "b"]`; `b"a\n"` → `["a"]`; `b""` → `[]`.
fn split_lines(bytes: Vec<u8>, name: &Path) -> Result<Vec<String>, MetricsError> {
    let text = match String::from_utf8(bytes) {
        Ok(text) => text,
        Err(err) => {
            let valid_up_to = err.utf8_error().valid_up_to();
            let line = 1 + err.as_bytes()[..valid_up_to].iter().filter(|&&b| b == b'\n').count();
            return Err(MetricsError::InvalidUtf8 { path: name.to_path_buf(), line });
        }
    };
    let body = text.strip_suffix('\n').unwrap_or(&text);
    if text.is_empty() {
        return Ok(Vec::new());
    }
    Ok(body.split('\n').map(str::to_string).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn final_newline_does_not_make_an_extra_line() {
        let name = Path::new("t");
        assert_eq!(split_lines(b"a\nb\n".to_vec(), name).unwrap(), ["a", "b"]);
        assert_eq!(split_lines(b"a\nb".to_vec(), name).unwrap(), ["a", "b"]);
        assert_eq!(split_lines(b"\n".to_vec(), name).unwrap(), [""]);
        assert!(split_lines(Vec::new(), name).unwrap().is_empty());
    }

    #[test]
    fn invalid_utf8_names_the_file_and_line() {
        let err = split_lines(b"ok\nfine\nbad \xff here\n".to_vec(), Path::new("hyp.txt")).unwrap_err();
        assert_eq!(err.to_string(), "hyp.txt:3: invalid UTF-8");
    }

    #[test]
    fn gzip_files_are_decompressed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.txt.gz");
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gz.write_all("one\ntwo €\n".as_bytes()).unwrap();
        std::fs::write(&path, gz.finish().unwrap()).unwrap();
        assert_eq!(read_lines(&path).unwrap(), ["one", "two €"]);
    }

    #[test]
    fn missing_file_is_an_error_naming_it() {
        let err = read_lines(Path::new("/nonexistent/refs.txt")).unwrap_err();
        assert_eq!(err.to_string(), "cannot read /nonexistent/refs.txt");
        assert!(std::error::Error::source(&err).is_some(), "the I/O error is kept as the source");
    }
}
