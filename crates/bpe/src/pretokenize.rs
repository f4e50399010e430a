//! Pre-tokenization: GPT-2's split pattern, as HuggingFace's `ByteLevel` pre-tokenizer
//! applies it (`use_regex = true`, `add_prefix_space = false`).
//!
//! The pattern is
//!
//! ```text
//! 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//! ```
//!
//! tried leftmost-first. The `regex` crate has no lookahead, so this is a hand-written
//! scanner that behaves identically (and is faster, with an ASCII fast path). Its rules, in
//! the pattern's order, at each position:
//!
//! 1. an apostrophe followed by `s`, `t`, `re`, `ve`, `m`, `ll` or `d` (lower case) is a piece;
//! 2. an optional ASCII space, then a maximal run of letters (`\p{L}`), or of numbers
//!    (`\p{N}`), or of "other" characters (neither whitespace, letter nor number);
//! 3. otherwise a whitespace run: the whole run at the end of the text; before a
//!    non-whitespace character, the run minus its last character (which then starts the next
//!    piece: a space joins the word after it, any other whitespace stands alone), or the one
//!    character if the run has only one.
//!
//! Example: `"Hello  world's\n"` → `["Hello", " ", " world", "'s", "\n"]`.

use unicode_general_category::{get_general_category, GeneralCategory as G};

/// The four character classes the pattern distinguishes.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Class {
    Letter,
    Number,
    Space,
    Other,
}

/// Classes of the ASCII characters, so the common case is one table look-up.
const ASCII: [Class; 128] = {
    let mut t = [Class::Other; 128];
    let mut i = 0;
    while i < 128 {
        let c = i as u8;
        t[i] = if c.is_ascii_alphabetic() {
            Class::Letter
        } else if c.is_ascii_digit() {
            Class::Number
        } else if matches!(c, b'\t' | b'\n' | 0x0B | 0x0C | b'\r' | b' ') {
            // Unicode White_Space in ASCII: U+0009..U+000D and U+0020.
            Class::Space
        } else {
            Class::Other
        };
        i += 1;
    }
    t
};

fn class_of(c: char) -> Class {
    if c.is_ascii() {
        return ASCII[c as usize];
    }
    // `\s` is Unicode White_Space, which is what `char::is_whitespace` tests.
    if c.is_whitespace() {
        return Class::Space;
    }
    match get_general_category(c) {
        G::UppercaseLetter | G::LowercaseLetter | G::TitlecaseLetter | G::ModifierLetter | G::OtherLetter => {
            Class::Letter
        }
        G::DecimalNumber | G::LetterNumber | G::OtherNumber => Class::Number,
        _ => Class::Other,
    }
}

/// The class of the character at byte `i` of `s`, and its length in bytes.
#[inline]
fn class_at(s: &str, i: usize) -> (Class, usize) {
    let b = s.as_bytes()[i];
    if b < 0x80 {
        return (ASCII[b as usize], 1);
    }
    let c = s[i..].chars().next().expect("i is a char boundary inside s");
    (class_of(c), c.len_utf8())
}

/// The end of the maximal run of class `class` starting at byte `i`.
#[inline]
fn run_end(s: &str, mut i: usize, class: Class) -> usize {
    let bytes = s.as_bytes();
    while i < bytes.len() {
        let b = bytes[i];
        if b < 0x80 {
            if ASCII[b as usize] != class {
                break;
            }
            i += 1;
        } else {
            let (k, len) = class_at(s, i);
            if k != class {
                break;
            }
            i += len;
        }
    }
    i
}

/// Length of a contraction (`'s`, `'t`, `'re`, `'ve`, `'m`, `'ll`, `'d`) starting at `rest`.
fn contraction_len(rest: &[u8]) -> Option<usize> {
    if rest.first() != Some(&b'\'') {
        return None;
    }
    match rest.get(1)? {
        b's' | b't' | b'm' | b'd' => Some(2),
        b'r' | b'v' if rest.get(2) == Some(&b'e') => Some(3),
        b'l' if rest.get(2) == Some(&b'l') => Some(3),
        _ => None,
    }
}

/// The end of the piece that starts at byte `start` of `s` (`start < s.len()`).
fn piece_end(s: &str, start: usize) -> usize {
    let bytes = s.as_bytes();
    if let Some(len) = contraction_len(&bytes[start..]) {
        return start + len;
    }
    let (class, len) = class_at(s, start);
    match class {
        Class::Letter | Class::Number | Class::Other => run_end(s, start + len, class),
        Class::Space => {
            // ` ?X+`: an ASCII space followed by a letter, number or other character.
            if bytes[start] == b' ' && start + 1 < bytes.len() {
                let (next, next_len) = class_at(s, start + 1);
                if next != Class::Space {
                    return run_end(s, start + 1 + next_len, next);
                }
            }
            // `\s+(?!\S)|\s+`.
            let end = run_end(s, start + len, Class::Space);
            if end == bytes.len() {
                return end;
            }
            let last_len = s[start..end].chars().next_back().map_or(0, char::len_utf8);
            if end - start > last_len {
                end - last_len
            } else {
                end
            }
        }
    }
}

/// Splits `s` into pieces; calls `f` on each, in order. The pieces concatenate to `s`.
pub fn for_each_piece<'a>(s: &'a str, mut f: impl FnMut(&'a str)) {
    let mut start = 0;
    while start < s.len() {
        let end = piece_end(s, start);
        f(&s[start..end]);
        start = end;
    }
}

/// Splits `s` into pieces (see the module doc).
pub fn pieces(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    for_each_piece(s, |p| out.push(p));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn module_doc_example_splits_as_gpt2() {
        assert_eq!(pieces("Hello  world's\n"), ["Hello", " ", " world", "'s", "\n"]);
    }

    #[test]
    fn whitespace_run_keeps_last_char_for_next_word() {
        assert_eq!(pieces("a   b"), ["a", "  ", " b"]);
        assert_eq!(pieces("a\n\n b"), ["a", "\n\n", " b"]);
        assert_eq!(pieces("a\n b"), ["a", "\n", " b"]);
        assert_eq!(pieces("a\nb"), ["a", "\n", "b"]);
        assert_eq!(pieces("a \u{a0}b"), ["a", " ", "\u{a0}", "b"]);
        assert_eq!(pieces("end   "), ["end", "   "]);
        assert_eq!(pieces(" "), [" "]);
    }

    #[test]
    fn contractions_are_lowercase_and_take_precedence() {
        assert_eq!(pieces("don't"), ["don", "'t"]);
        assert_eq!(pieces("we'll I'M"), ["we", "'ll", " I", "'", "M"]);
        assert_eq!(pieces("'st"), ["'s", "t"]);
        assert_eq!(pieces(" 's"), [" '", "s"]);
        assert_eq!(pieces("...'s"), ["...'", "s"]);
        // `'re`, `'ve`, `'ll` need their third letter (HuggingFace `tokenizers` 0.23.3 agrees).
        assert_eq!(pieces("'rx"), ["'", "rx"]);
        assert_eq!(pieces("'vo"), ["'", "vo"]);
        assert_eq!(pieces("'lo"), ["'", "lo"]);
    }

    #[test]
    fn letters_numbers_and_others_form_separate_runs() {
        assert_eq!(pieces("a1b2 ¡Hola! x²"), ["a", "1", "b", "2", " ¡", "Hola", "!", " x", "²"]);
        assert_eq!(pieces("日本語 123"), ["日本語", " 123"]);
        // A combining mark (Mn) is not a letter.
        assert_eq!(pieces("e\u{301}t"), ["e", "\u{301}", "t"]);
    }

    /// `\p{N}` is all three number categories: Arabic-Indic digits (Nd), `½`, `²`, `³` (No)
    /// and Roman numerals (Nl) run together, apart from the other characters after them (as
    /// HuggingFace `tokenizers` 0.23.3's `ByteLevel` splits these strings).
    #[test]
    fn non_ascii_numbers_of_every_category_form_one_run() {
        assert_eq!(pieces("x٣½!"), ["x", "٣½", "!"]);
        assert_eq!(pieces("Ⅻ٣?"), ["Ⅻ٣", "?"]);
        assert_eq!(pieces(" ²³x"), [" ²³", "x"]);
    }

    #[test]
    fn pieces_concatenate_to_the_input() {
        let s = "  x\t\ty \u{3000}z 👍🏽!! 'd";
        assert_eq!(pieces(s).concat(), s);
    }
}
