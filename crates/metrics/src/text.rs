//! Python `str` semantics that sacreBLEU's numbers depend on.
//!
//! sacreBLEU splits with `str.split()`, strips with `str.rstrip()` and lowercases with
//! `str.lower()`. Python's whitespace (`str.isspace`) is Unicode `White_Space` plus the four
//! ASCII information separators U+001C..U+001F, which Rust's `char::is_whitespace` leaves out:
//! `"a\x1cb".split()` is `['a', 'b']` in Python. Lowercasing is Rust's `str::to_lowercase`,
//! which like Python applies the full Unicode mappings and the final-sigma rule
//! (`tests/unicode_tables.rs` checks every code point against Python's tables).

/// Whether Python's `str.isspace()` is true for `c`.
///
/// Example: `' '`, `'\t'`, `'\u{a0}'`, `'\u{3000}'`, `'\u{1c}'` are; `'\u{200b}'` is not.
#[inline]
pub fn is_py_whitespace(c: char) -> bool {
    if c.is_ascii() {
        matches!(c, '\t'..='\r' | ' ' | '\u{1c}'..='\u{1f}')
    } else {
        c.is_whitespace()
    }
}

/// Python's `s.split()`: the non-empty runs of non-whitespace.
///
/// Example: `" a\u{a0}b\x1cc  "` → `["a", "b", "c"]`.
pub fn py_split(s: &str) -> PySplit<'_> {
    PySplit { s, pos: 0 }
}

/// The iterator of [`py_split`]: scans bytes, decoding a character only for non-ASCII bytes.
#[derive(Clone, Debug)]
pub struct PySplit<'a> {
    s: &'a str,
    pos: usize,
}

impl<'a> PySplit<'a> {
    /// The length of the whitespace character at byte `i`, or 0 if there is none.
    #[inline]
    fn whitespace_len(&self, i: usize) -> usize {
        let b = self.s.as_bytes()[i];
        if b < 0x80 {
            usize::from(is_py_whitespace(b as char))
        } else {
            match self.s[i..].chars().next() {
                Some(c) if c.is_whitespace() => c.len_utf8(),
                _ => 0,
            }
        }
    }
}

impl<'a> Iterator for PySplit<'a> {
    type Item = &'a str;

    fn next(&mut self) -> Option<&'a str> {
        let bytes = self.s.as_bytes();
        // 1. Skip whitespace.
        while self.pos < bytes.len() {
            match self.whitespace_len(self.pos) {
                0 => break,
                n => self.pos += n,
            }
        }
        if self.pos == bytes.len() {
            return None;
        }
        // 2. Take the run up to the next whitespace (continuation bytes are never whitespace).
        let start = self.pos;
        while self.pos < bytes.len() && (bytes[self.pos] & 0xC0 == 0x80 || self.whitespace_len(self.pos) == 0) {
            self.pos += 1;
        }
        Some(&self.s[start..self.pos])
    }
}

/// Python's `s.rstrip()`: `s` without trailing whitespace.
pub fn py_rstrip(s: &str) -> &str {
    s.trim_end_matches(is_py_whitespace)
}

/// Python's `" ".join(s.split())`: runs of whitespace become one space, none at either end.
pub fn py_collapse_whitespace(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for token in py_split(s) {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(token);
    }
    out
}

/// Python's `s.lower()`.
pub fn py_lower(s: &str) -> String {
    s.to_lowercase()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn information_separators_are_whitespace_as_in_python() {
        assert_eq!(py_split("a\x1cb\x1dc\x1ed\x1fe").collect::<Vec<_>>(), ["a", "b", "c", "d", "e"]);
    }

    #[test]
    fn split_agrees_with_splitting_on_the_predicate() {
        for s in ["", " ", "a", " a b ", "é\u{a0}日本\u{3000}x\u{2028}", "\u{85}a\u{85}", "a\u{200b}\u{1680}b"] {
            let slow: Vec<&str> = s.split(is_py_whitespace).filter(|t| !t.is_empty()).collect();
            assert_eq!(py_split(s).collect::<Vec<_>>(), slow, "{s:?}");
        }
    }

    #[test]
    fn zero_width_space_is_not_whitespace_as_in_python() {
        assert_eq!(py_split("a\u{200b}b").count(), 1);
    }

    #[test]
    fn collapse_joins_tokens_with_single_spaces() {
        assert_eq!(py_collapse_whitespace("  a\t\tb\u{3000}c \n"), "a b c");
        assert_eq!(py_collapse_whitespace(" \t "), "");
    }

    #[test]
    fn rstrip_keeps_leading_whitespace() {
        assert_eq!(py_rstrip("  a b \u{a0}\r"), "  a b");
    }

    #[test]
    fn lower_applies_final_sigma_like_python() {
        // Python 3.11: 'ΟΔΟΣ ΣΑΣ'.lower() == 'οδος σας'
        assert_eq!(py_lower("ΟΔΟΣ ΣΑΣ"), "οδος σας");
    }
}
