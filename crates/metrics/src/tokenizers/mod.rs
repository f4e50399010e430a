//! sacreBLEU's BLEU tokenizers, by the names sacreBLEU gives them: `13a` (the default),
//! `none`, `intl` and `char`.
//!
//! Each returns exactly the string sacreBLEU's tokenizer returns; BLEU then splits it on
//! (Python) whitespace. The Chinese, Japanese, Korean and SentencePiece tokenizers of
//! sacreBLEU need external models or dictionaries and are left out.

mod characters;
mod intl;
mod mteval13a;

use std::borrow::Cow;
use std::fmt;
use std::str::FromStr;

use crate::MetricsError;

pub use characters::tokenize_char;
pub use intl::{intl_class, tokenize_intl, IntlClass};
pub use mteval13a::tokenize_13a;

/// A BLEU tokenizer, named as in sacreBLEU's `--tokenize` option and signature (`tok:13a`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Tokenizer {
    /// `13a`: mteval-v13a.pl, the WMT standard and sacreBLEU's default. Splits ASCII
    /// punctuation, periods and commas unless next to digits, and dashes after digits.
    Mteval13a,
    /// `none`: split on whitespace only.
    None,
    /// `intl`: mteval-v14.pl's international tokenization: splits Unicode punctuation (except
    /// between digits) and symbols.
    Intl,
    /// `char`: every non-whitespace character is a token.
    Char,
}

impl Tokenizer {
    /// The name sacreBLEU uses in options and signatures.
    pub fn name(self) -> &'static str {
        match self {
            Tokenizer::Mteval13a => "13a",
            Tokenizer::None => "none",
            Tokenizer::Intl => "intl",
            Tokenizer::Char => "char",
        }
    }

    /// All tokenizers, in the order of the names above.
    pub const ALL: [Tokenizer; 4] = [Tokenizer::Mteval13a, Tokenizer::None, Tokenizer::Intl, Tokenizer::Char];

    /// Tokenizes one line exactly as sacreBLEU's tokenizer of this name does.
    ///
    /// Example: `Tokenizer::Mteval13a.tokenize("It wasn't surprising.")` is
    /// `"It wasn't surprising ."`.
    pub fn tokenize(self, line: &str) -> String {
        match self {
            Tokenizer::Mteval13a => tokenize_13a(line),
            Tokenizer::None => line.to_string(),
            Tokenizer::Intl => tokenize_intl(line),
            Tokenizer::Char => tokenize_char(line),
        }
    }

    /// A string whose whitespace split equals that of [`Tokenizer::tokenize`]'s result,
    /// without the final whitespace collapse (and without a copy for `none`).
    pub(crate) fn tokenize_for_split(self, line: &str) -> Cow<'_, str> {
        match self {
            Tokenizer::Mteval13a => Cow::Owned(mteval13a::spaced_13a(line)),
            Tokenizer::None => Cow::Borrowed(line),
            Tokenizer::Intl => Cow::Owned(intl::spaced_intl(line)),
            Tokenizer::Char => Cow::Owned(tokenize_char(line)),
        }
    }
}

impl fmt::Display for Tokenizer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Tokenizer {
    type Err = MetricsError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Tokenizer::ALL.into_iter().find(|t| t.name() == s).ok_or_else(|| MetricsError::UnknownTokenizer(s.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_displays_parse_back_to_the_same_tokenizer() {
        for t in Tokenizer::ALL {
            assert_eq!(t.name().parse::<Tokenizer>().unwrap(), t);
            assert_eq!(t.to_string().parse::<Tokenizer>().unwrap(), t);
        }
    }

    #[test]
    fn unknown_tokenizer_name_is_an_error_naming_it() {
        let err = "zh".parse::<Tokenizer>().unwrap_err();
        assert!(err.to_string().contains("\"zh\""), "{err}");
    }

    #[test]
    fn none_tokenizer_returns_the_line_unchanged() {
        assert_eq!(Tokenizer::None.tokenize(" a,b. "), " a,b. ");
    }
}
