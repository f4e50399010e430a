//! sacreBLEU's `char` tokenizer: `" ".join(line)`, every character (whitespace included)
//! separated by a space. BLEU's whitespace split then keeps the non-whitespace characters.

/// `" ".join(line)` in Python.
///
/// Example: `"ab c"` → `"a b   c"` (the space is itself a character between two joins).
pub fn tokenize_char(line: &str) -> String {
    let mut out = String::with_capacity(line.len() * 2);
    for (i, c) in line.chars().enumerate() {
        if i > 0 {
            out.push(' ');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_character_is_separated_by_one_space() {
        assert_eq!(tokenize_char("ab c"), "a b   c");
        assert_eq!(tokenize_char("日本"), "日 本");
        assert_eq!(tokenize_char(""), "");
    }
}
