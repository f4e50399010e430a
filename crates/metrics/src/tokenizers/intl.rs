//! sacreBLEU's `intl` tokenizer (`tokenizer_intl.py`), mteval-v14.pl's international
//! tokenization, on Unicode general categories.
//!
//! sacreBLEU applies, in turn, with the `regex` module:
//!
//! 1. `(\P{N})(\p{P})` → `\1 \2 `: punctuation preceded by a non-number
//! 2. `(\p{P})(\P{N})` → ` \1 \2`: punctuation followed by a non-number
//! 3. `(\p{S})` → ` \1 `: every symbol
//!
//! then `" ".join(line.split())`. So punctuation between two digits (`1,000`, `3.14`) stays,
//! and, as in mteval-v14.pl, a period right after a number at the very end of the line stays
//! attached (`1999.`): the line is not padded with spaces as in `13a`. Each pass is a scan
//! over characters (the patterns are fixed pairs). The categories come from the Unicode 16
//! tables of `unicode-general-category`, plus the P, S and N code points Unicode 17 added,
//! which the `regex` module sacreBLEU uses already knows ([`UNICODE_17_ADDITIONS`]);
//! `tests/unicode_tables.rs` checks every code point against that module's tables.

use unicode_general_category::{get_general_category, GeneralCategory as Gc};

use crate::text::py_collapse_whitespace;

/// Tokenizes `line` as sacreBLEU's `TokenizerV14International` does.
///
/// Example: `"„Hallo“, sagte er: 1,000€."` → `"„ Hallo “ , sagte er : 1,000 € ."`.
pub fn tokenize_intl(line: &str) -> String {
    py_collapse_whitespace(&spaced_intl(line))
}

/// [`tokenize_intl`] before its last step, the whitespace collapse.
pub(crate) fn spaced_intl(line: &str) -> String {
    let chars: Vec<char> = line.chars().collect();
    // 1. Punctuation preceded by a non-number.
    let pass1 = substitute_pairs(
        &chars,
        |x, y| !is_number(x) && is_punctuation(y),
        |x, y, out| out.extend_from_slice(&[x, ' ', y, ' ']),
    );
    // 2. Punctuation followed by a non-number.
    let pass2 = substitute_pairs(
        &pass1,
        |x, y| is_punctuation(x) && !is_number(y),
        |x, y, out| out.extend_from_slice(&[' ', x, ' ', y]),
    );
    // 3. Symbols, wherever they are.
    let mut pass3 = String::with_capacity(pass2.len() * 2);
    for &c in &pass2 {
        if is_symbol(c) {
            pass3.push(' ');
            pass3.push(c);
            pass3.push(' ');
        } else {
            pass3.push(c);
        }
    }
    pass3
}

/// The classes of Unicode general categories the `intl` tokenizer tells apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IntlClass {
    /// `\p{P}`: Pc, Pd, Ps, Pe, Pi, Pf, Po.
    Punctuation,
    /// `\p{S}`: Sm, Sc, Sk, So.
    Symbol,
    /// `\p{N}`: Nd, Nl, No.
    Number,
    /// Every other category.
    Other,
}

/// The class of `c` (the three are disjoint: a general category is in at most one).
///
/// Example: `'.'` → Punctuation, `'€'` → Symbol, `'½'` → Number, `'a'` → Other.
pub fn intl_class(c: char) -> IntlClass {
    if is_punctuation(c) {
        IntlClass::Punctuation
    } else if is_symbol(c) {
        IntlClass::Symbol
    } else if is_number(c) {
        IntlClass::Number
    } else {
        IntlClass::Other
    }
}

/// `\p{P}`: the categories Pc, Pd, Ps, Pe, Pi, Pf, Po.
pub(crate) fn is_punctuation(c: char) -> bool {
    if c.is_ascii() {
        return c.is_ascii_punctuation() && !is_ascii_symbol(c);
    }
    matches!(
        category(c),
        Gc::ConnectorPunctuation
            | Gc::DashPunctuation
            | Gc::OpenPunctuation
            | Gc::ClosePunctuation
            | Gc::InitialPunctuation
            | Gc::FinalPunctuation
            | Gc::OtherPunctuation
    )
}

/// `\p{S}`: the categories Sm, Sc, Sk, So.
pub(crate) fn is_symbol(c: char) -> bool {
    if c.is_ascii() {
        return is_ascii_symbol(c);
    }
    matches!(category(c), Gc::MathSymbol | Gc::CurrencySymbol | Gc::ModifierSymbol | Gc::OtherSymbol)
}

/// `\p{N}`: the categories Nd, Nl, No.
pub(crate) fn is_number(c: char) -> bool {
    if c.is_ascii() {
        return c.is_ascii_digit();
    }
    matches!(category(c), Gc::DecimalNumber | Gc::LetterNumber | Gc::OtherNumber)
}

/// The general category of `c` as sacreBLEU's `regex` module sees it: Unicode 16's, and
/// for the code points Unicode 17 assigned to P, S or N a representative of that class.
fn category(c: char) -> Gc {
    match get_general_category(c) {
        Gc::Unassigned => match newer_unicode_class(c) {
            IntlClass::Punctuation => Gc::OtherPunctuation,
            IntlClass::Symbol => Gc::OtherSymbol,
            IntlClass::Number => Gc::OtherNumber,
            IntlClass::Other => Gc::Unassigned,
        },
        gc => gc,
    }
}

/// The class of a code point Unicode 16 leaves unassigned, per [`UNICODE_17_ADDITIONS`].
fn newer_unicode_class(c: char) -> IntlClass {
    let i = UNICODE_17_ADDITIONS.partition_point(|&(_, end, _)| end < c);
    match UNICODE_17_ADDITIONS.get(i) {
        Some(&(start, _, class)) if start <= c => class,
        _ => IntlClass::Other,
    }
}

/// Code points unassigned in Unicode 16 that the `regex` module sacreBLEU uses (2026.11.15,
/// Unicode 17) puts in `\p{P}`, `\p{S}` or `\p{N}`: inclusive ranges, sorted. Found by
/// `tests/unicode_tables.rs`, which compares every code point with that module's tables.
const UNICODE_17_ADDITIONS: &[(char, char, IntlClass)] = &[
    ('\u{20C1}', '\u{20C4}', IntlClass::Symbol),
    ('\u{2B96}', '\u{2B96}', IntlClass::Symbol),
    ('\u{2E60}', '\u{2E63}', IntlClass::Punctuation),
    ('\u{FBC3}', '\u{FBD2}', IntlClass::Symbol),
    ('\u{FD90}', '\u{FD91}', IntlClass::Symbol),
    ('\u{FDC8}', '\u{FDCE}', IntlClass::Symbol),
    ('\u{10EC9}', '\u{10ECA}', IntlClass::Symbol),
    ('\u{10ED0}', '\u{10ED0}', IntlClass::Punctuation),
    ('\u{10ED1}', '\u{10ED8}', IntlClass::Symbol),
    ('\u{11DE0}', '\u{11DE9}', IntlClass::Number),
    ('\u{1246F}', '\u{1246F}', IntlClass::Number),
    ('\u{12475}', '\u{1247F}', IntlClass::Number),
    ('\u{12550}', '\u{12686}', IntlClass::Number),
    ('\u{16FF4}', '\u{16FF6}', IntlClass::Number),
    ('\u{1CCFA}', '\u{1CCFC}', IntlClass::Symbol),
    ('\u{1CEBA}', '\u{1CED0}', IntlClass::Symbol),
    ('\u{1CED2}', '\u{1CED4}', IntlClass::Symbol),
    ('\u{1CEDD}', '\u{1CEFD}', IntlClass::Symbol),
    ('\u{1D1EB}', '\u{1D1FF}', IntlClass::Symbol),
    ('\u{1D253}', '\u{1D25A}', IntlClass::Symbol),
    ('\u{1D25D}', '\u{1D25E}', IntlClass::Symbol),
    ('\u{1D260}', '\u{1D27F}', IntlClass::Symbol),
    ('\u{1DB00}', '\u{1DB1C}', IntlClass::Symbol),
    ('\u{1F1AE}', '\u{1F1AE}', IntlClass::Symbol),
    ('\u{1F6D8}', '\u{1F6D9}', IntlClass::Symbol),
    ('\u{1F777}', '\u{1F77A}', IntlClass::Symbol),
    ('\u{1F7DA}', '\u{1F7DB}', IntlClass::Symbol),
    ('\u{1F7F1}', '\u{1F7FF}', IntlClass::Symbol),
    ('\u{1F8D0}', '\u{1F8D8}', IntlClass::Symbol),
    ('\u{1FA54}', '\u{1FA57}', IntlClass::Symbol),
    ('\u{1FA8A}', '\u{1FA8E}', IntlClass::Symbol),
    ('\u{1FAC8}', '\u{1FAC8}', IntlClass::Symbol),
    ('\u{1FACC}', '\u{1FACD}', IntlClass::Symbol),
    ('\u{1FADD}', '\u{1FADD}', IntlClass::Symbol),
    ('\u{1FAEA}', '\u{1FAEB}', IntlClass::Symbol),
    ('\u{1FAEF}', '\u{1FAEF}', IntlClass::Symbol),
    ('\u{1FAF9}', '\u{1FAFA}', IntlClass::Symbol),
    ('\u{1FBFA}', '\u{1FBFA}', IntlClass::Symbol),
];

/// The ASCII characters of categories Sm, Sc and Sk: `$ + < = > ^ ` | ~`. Every other ASCII
/// punctuation character is in a P category.
fn is_ascii_symbol(c: char) -> bool {
    matches!(c, '$' | '+' | '<' | '=' | '>' | '^' | '`' | '|' | '~')
}

/// One `regex.sub` pass of a two-character pattern (leftmost, non-overlapping), as in
/// `mteval13a.rs` but over characters.
///
/// Example (pass 1): `['a', '.', '.']` → `['a', ' ', '.', ' ', '.']`: the match `a.`
/// consumes the first period, so `..` is never tested.
fn substitute_pairs(
    input: &[char],
    matches: impl Fn(char, char) -> bool,
    replace: impl Fn(char, char, &mut Vec<char>),
) -> Vec<char> {
    let mut out = Vec::with_capacity(input.len() + input.len() / 2);
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
    fn ascii_fast_path_agrees_with_the_category_tables() {
        for b in 0u8..128 {
            let c = b as char;
            let gc = get_general_category(c);
            let p = gc.abbreviation().starts_with('P');
            let s = gc.abbreviation().starts_with('S');
            let n = gc.abbreviation().starts_with('N');
            assert_eq!((is_punctuation(c), is_symbol(c), is_number(c)), (p, s, n), "{c:?}");
        }
    }

    // The expected strings below are sacrebleu 2.6.0's `TokenizerV14International()(line)`.

    #[test]
    fn punctuation_between_digits_stays_but_symbols_split() {
        assert_eq!(tokenize_intl("„Hallo“, sagte er: 1,000€."), "„ Hallo “ , sagte er : 1,000 € .");
    }

    #[test]
    fn period_after_a_final_number_stays_attached_as_in_mteval_v14() {
        assert_eq!(tokenize_intl("in 1999."), "in 1999.");
    }
}
