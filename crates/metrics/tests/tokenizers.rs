//! The hand-written `13a` and `intl` scans against the regular expressions sacreBLEU applies,
//! on random strings made of the characters those expressions care about.
//!
//! The reference functions below transcribe `tokenizer_13a.py`, `tokenizer_re.py` and
//! `tokenizer_intl.py` (sacreBLEU 2.6.0) with the `regex` crate: same patterns, same
//! replacements, same order. Rust's `replace_all` and Python's `re.sub` both replace the
//! leftmost non-overlapping matches.

use attend_metrics::text::{is_py_whitespace, py_collapse_whitespace, py_split};
use attend_metrics::tokenizers::{tokenize_13a, tokenize_intl};
use proptest::prelude::*;
use regex::Regex;

fn reference_13a(line: &str) -> String {
    let mut line = line.replace("<skipped>", "").replace("-\n", "").replace('\n', " ");
    if line.contains('&') {
        line = line.replace("&quot;", "\"").replace("&amp;", "&").replace("&lt;", "<").replace("&gt;", ">");
    }
    let line = format!(" {line} ");
    let rules = [
        (r"([\{-\~\[-\` -\&\(-\+\:-\@\/])", " ${1} "),
        (r"([^0-9])([\.,])", "${1} ${2} "),
        (r"([\.,])([^0-9])", " ${1} ${2}"),
        (r"([0-9])(-)", "${1} ${2} "),
    ];
    let out = rules.iter().fold(line, |s, (pattern, replacement)| {
        Regex::new(pattern).unwrap().replace_all(&s, *replacement).into_owned()
    });
    py_collapse_whitespace(&out)
}

fn reference_intl(line: &str) -> String {
    let rules = [(r"(\P{N})(\p{P})", "${1} ${2} "), (r"(\p{P})(\P{N})", " ${1} ${2}"), (r"(\p{S})", " ${1} ")];
    let out = rules.iter().fold(line.to_string(), |s, (pattern, replacement)| {
        Regex::new(pattern).unwrap().replace_all(&s, *replacement).into_owned()
    });
    py_collapse_whitespace(&out)
}

/// Pieces that exercise every rule: digits, the split punctuation, periods, commas, dashes,
/// entities, markers, Unicode punctuation, symbols, numbers and whitespace.
const PIECES: &[&str] = &[
    "a",
    "Z",
    "é",
    "日",
    "0",
    "7",
    "٣",
    "½",
    "Ⅻ",
    ".",
    ",",
    "-",
    "'",
    "\"",
    "&",
    ";",
    "<",
    ">",
    "/",
    "{",
    "}",
    "[",
    "]",
    "(",
    ")",
    "$",
    "%",
    "#",
    "@",
    "~",
    "^",
    "`",
    "|",
    "_",
    "+",
    "=",
    "!",
    "?",
    ":",
    "*",
    "\\",
    " ",
    "  ",
    "\t",
    "\n",
    "\u{a0}",
    "\u{3000}",
    "\u{1c}",
    "„",
    "“",
    "«",
    "»",
    "…",
    "—",
    "–",
    "¿",
    "¡",
    "€",
    "©",
    "→",
    "😀",
    "。",
    "、",
    "！",
    "&quot;",
    "&amp;",
    "&lt;",
    "&gt;",
    "<skipped>",
    "-\n",
    "3.14",
    "1,000",
    "e\u{301}",
];

fn text() -> impl Strategy<Value = String> {
    prop::collection::vec(prop::sample::select(PIECES), 0..24).prop_map(|pieces| pieces.concat())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn scan_13a_equals_the_regular_expressions(line in text()) {
        prop_assert_eq!(tokenize_13a(&line), reference_13a(&line));
    }

    #[test]
    fn fast_whitespace_split_equals_splitting_on_the_predicate(line in text()) {
        let slow: Vec<&str> = line.split(is_py_whitespace).filter(|t| !t.is_empty()).collect();
        prop_assert_eq!(py_split(&line).collect::<Vec<_>>(), slow);
    }

    #[test]
    fn scan_intl_equals_the_regular_expressions(line in text()) {
        prop_assert_eq!(tokenize_intl(&line), reference_intl(&line));
    }

    #[test]
    fn plain_lowercase_words_are_only_respaced_by_13a(
        words in prop::collection::vec("[a-z]{1,8}", 0..10)
    ) {
        // Lines of plain words are already tokenized: 13a only normalizes their spacing.
        let line = words.join("  ");
        prop_assert_eq!(tokenize_13a(&line), words.join(" "));
    }
}
