//! sacreBLEU's `13a` tokenizer (`tokenizer_13a.py` + `tokenizer_re.py`), equivalent to
//! mteval-v13a.pl, the WMT standard.
//!
//! sacreBLEU applies four regular-expression substitutions in turn, each a left-to-right scan
//! for non-overlapping matches; every pattern is one character or a fixed pair of characters,
//! all ASCII, so each pass is written here as one scan over bytes (UTF-8 multi-byte sequences
//! never contain ASCII bytes, so they pass through untouched):
//!
//! 1. `([\{-\~\[-\` -\&\(-\+\:-\@\/])` → ` \1 `: split ASCII punctuation except `'` `,` `-` `.`
//! 2. `([^0-9])([\.,])` → `\1 \2 `: period and comma unless preceded by a digit
//! 3. `([\.,])([^0-9])` → ` \1 \2`: period and comma unless followed by a digit
//! 4. `([0-9])(-)` → `\1 \2 `: dash when preceded by a digit
//!
//! then `" ".join(line.split())` (step 4, left out by the BLEU path, which splits anyway). `tests/tokenizers.rs` checks this scan against the regular
//! expressions themselves on random strings, and against sacreBLEU's output on fixtures.

use std::borrow::Cow;

use crate::text::py_collapse_whitespace;

/// Tokenizes `line` as sacreBLEU's `Tokenizer13a` does.
///
/// Example: `"It costs 3.14, or 1,000-2,000."` → `"It costs 3.14 , or 1,000 - 2,000 ."`.
pub fn tokenize_13a(line: &str) -> String {
    py_collapse_whitespace(&spaced_13a(line))
}

/// [`tokenize_13a`] before its last step, the whitespace collapse: the same tokens, with
/// runs of whitespace left as they are (BLEU splits on whitespace anyway).
pub(crate) fn spaced_13a(line: &str) -> String {
    // 1. The language-independent part: mteval-v13a's un-escaping.
    let line = unescape(line);
    // 2. Pad with spaces (so that a final period is followed by a non-digit) and split off
    //    ASCII punctuation.
    let mut padded = Vec::with_capacity(line.len() * 2 + 2);
    padded.push(b' ');
    for &b in line.as_bytes() {
        if is_split_punctuation(b) {
            padded.extend_from_slice(&[b' ', b, b' ']);
        } else {
            padded.push(b);
        }
    }
    padded.push(b' ');
    // 3. Periods and commas, then dashes after digits.
    let pass2 = substitute_pairs(
        &padded,
        |x, y| !x.is_ascii_digit() && is_period_or_comma(y),
        |x, y, out| out.extend_from_slice(&[x, b' ', y, b' ']),
    );
    let pass3 = substitute_pairs(
        &pass2,
        |x, y| is_period_or_comma(x) && !y.is_ascii_digit(),
        |x, y, out| out.extend_from_slice(&[b' ', x, b' ', y]),
    );
    let pass4 = substitute_pairs(
        &pass3,
        |x, y| x.is_ascii_digit() && y == b'-',
        |x, y, out| out.extend_from_slice(&[x, b' ', y, b' ']),
    );
    String::from_utf8(pass4).expect("13a inserts only ASCII spaces next to ASCII bytes, so the text stays UTF-8")
}

/// The replacements of `Tokenizer13a.__call__`, in its order (each on the previous result).
fn unescape(line: &str) -> Cow<'_, str> {
    let mut s = Cow::Borrowed(line);
    if s.contains("<skipped>") {
        s = Cow::Owned(s.replace("<skipped>", ""));
    }
    if s.contains("-\n") {
        s = Cow::Owned(s.replace("-\n", ""));
    }
    if s.contains('\n') {
        s = Cow::Owned(s.replace('\n', " "));
    }
    if s.contains('&') {
        for (entity, plain) in [("&quot;", "\""), ("&amp;", "&"), ("&lt;", "<"), ("&gt;", ">")] {
            if s.contains(entity) {
                s = Cow::Owned(s.replace(entity, plain));
            }
        }
    }
    s
}

/// The class `[\{-\~\[-\` -\&\(-\+\:-\@\/]`: `{|}~`, ``[\]^_` ``, space to `&`, `(` to `+`,
/// `:` to `@`, and `/`.
fn is_split_punctuation(b: u8) -> bool {
    matches!(b, b'{'..=b'~' | b'['..=b'`' | b' '..=b'&' | b'('..=b'+' | b':'..=b'@' | b'/')
}

fn is_period_or_comma(b: u8) -> bool {
    b == b'.' || b == b','
}

/// One `re.sub` pass of a two-character pattern: scans left to right; where `matches(x, y)`
/// holds for the bytes at `i` and `i + 1`, writes `replace(x, y)` and resumes at `i + 2`.
///
/// This is Python's leftmost, non-overlapping matching: a byte consumed as `y` is never the
/// `x` of the next match. Example (pass 2, `x` not a digit and `y` in `.,` → `x ␠ y ␠`):
/// `b"a.,b"` → `b"a . ,b"`: the match `a.` consumes the period, so `.,` is never tested.
fn substitute_pairs(input: &[u8], matches: impl Fn(u8, u8) -> bool, replace: impl Fn(u8, u8, &mut Vec<u8>)) -> Vec<u8> {
    let mut out = Vec::with_capacity(input.len() + input.len() / 4);
    let mut i = 0;
    while i < input.len() {
        if i + 1 < input.len() && matches(input[i], input[i + 1]) {
            replace(input[i], input[i + 1], &mut out);
            i += 2;
        } else {
            out.push(input[i]);
            i += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sacrebleu_readme_sentences_tokenize_as_sacrebleu() {
        // sacrebleu 2.6.0: Tokenizer13a()("It wasn't surprising.") == "It wasn't surprising ."
        assert_eq!(tokenize_13a("It wasn't surprising."), "It wasn't surprising .");
        assert_eq!(tokenize_13a("The dog bit the man."), "The dog bit the man .");
    }

    // The expected strings below are sacrebleu 2.6.0's `Tokenizer13a()(line)`.

    #[test]
    fn numbers_keep_their_separators_but_dashes_after_digits_split() {
        assert_eq!(tokenize_13a("It costs 3.14, or 1,000-2,000."), "It costs 3.14 , or 1,000 - 2,000 .");
    }

    #[test]
    fn html_entities_are_unescaped_in_sequence() {
        // "&amp;lt;" becomes "&lt;" and then "<", as the Python replace calls chain.
        assert_eq!(tokenize_13a("&amp;lt;b&gt; &quot;x&quot;"), "< b > \" x \"");
    }

    #[test]
    fn skipped_markers_and_hyphenated_line_breaks_are_removed() {
        assert_eq!(tokenize_13a("a <skipped> b-\nc\nd"), "a bc d");
    }

    #[test]
    fn empty_and_blank_lines_give_empty_strings() {
        assert_eq!(tokenize_13a(""), "");
        assert_eq!(tokenize_13a(" \t "), "");
    }
}
