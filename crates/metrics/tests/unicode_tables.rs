//! Every code point against the Unicode tables of sacreBLEU's dependencies.
//!
//! `fixtures/unicode_tables.json` (written by `fixtures/make_sacrebleu_fixtures.py`) holds
//! Python's `str.isspace` and `str.lower` and the `regex` module's `\p{P}`, `\p{S}`, `\p{N}`.
//! Python 3.11's Unicode version (14) is older than ours (16, Rust's standard library), so
//! `str.lower` is compared on the code points Python assigns; the `regex` module's (17) is
//! newer, and `intl` carries the P/S/N code points 17 added, so it is compared everywhere.

use std::collections::HashMap;
use std::sync::OnceLock;

use attend_metrics::text::{is_py_whitespace, py_lower};
use attend_metrics::tokenizers::{intl_class, IntlClass};
use serde_json::Value;

fn tables() -> &'static Value {
    static TABLES: OnceLock<Value> = OnceLock::new();
    TABLES.get_or_init(|| {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/unicode_tables.json");
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
    })
}

/// Membership test for a list of inclusive `[start, end]` code-point ranges.
fn in_ranges(name: &str) -> impl Fn(u32) -> bool {
    let ranges: Vec<(u32, u32)> = tables()[name]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r[0].as_u64().unwrap() as u32, r[1].as_u64().unwrap() as u32))
        .collect();
    move |c| {
        let i = ranges.partition_point(|&(_, end)| end < c);
        i < ranges.len() && ranges[i].0 <= c
    }
}

fn all_chars() -> impl Iterator<Item = char> {
    (0..=0x10FFFFu32).filter_map(char::from_u32)
}

#[test]
fn whitespace_is_pythons_isspace_for_every_code_point() {
    let py_space = in_ranges("python_isspace");
    let wrong: Vec<String> = all_chars()
        .filter(|&c| is_py_whitespace(c) != py_space(c as u32))
        .map(|c| format!("U+{:04X}", c as u32))
        .collect();
    assert!(wrong.is_empty(), "differ from str.isspace: {wrong:?}");
}

#[test]
fn lowercase_is_pythons_lower_for_every_code_point_python_assigns() {
    // Python 3.11's tables are Unicode 14; code points Unicode 14 leaves unassigned may have
    // gained a lowercase mapping since, which Python cannot know.
    let py_lower_map: HashMap<u32, String> = tables()["python_lower"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e[0].as_u64().unwrap() as u32, e[1].as_str().unwrap().to_string()))
        .collect();
    let unassigned_in_python = in_ranges("python_unassigned");
    let mut wrong = Vec::new();
    for c in all_chars() {
        let ours = py_lower(&c.to_string());
        let theirs = py_lower_map.get(&(c as u32)).cloned().unwrap_or_else(|| c.to_string());
        if ours != theirs && !unassigned_in_python(c as u32) {
            wrong.push(format!("U+{:04X}: {ours:?} vs {theirs:?}", c as u32));
        }
    }
    assert!(wrong.is_empty(), "differ from str.lower: {wrong:?}");
    for (upper, lower) in tables()["python_lower_final_sigma"].as_object().unwrap() {
        assert_eq!(&py_lower(upper), lower.as_str().unwrap(), "final sigma in {upper:?}");
    }
}

#[test]
fn intl_categories_are_the_regex_modules_for_every_code_point() {
    // Our tables are Unicode 16 plus the P/S/N code points of Unicode 17 (the regex
    // module's version); together they must classify every code point as the module does.
    let (p, s, n) = (in_ranges("regex_P"), in_ranges("regex_S"), in_ranges("regex_N"));
    let wrong: Vec<String> = all_chars()
        .filter_map(|c| {
            let cp = c as u32;
            let theirs = if p(cp) {
                IntlClass::Punctuation
            } else if s(cp) {
                IntlClass::Symbol
            } else if n(cp) {
                IntlClass::Number
            } else {
                IntlClass::Other
            };
            let ours = intl_class(c);
            (ours != theirs).then(|| format!("U+{cp:04X}: {ours:?} vs {theirs:?}"))
        })
        .collect();
    assert!(wrong.is_empty(), "{} differ from the regex module: {wrong:?}", wrong.len());
}
