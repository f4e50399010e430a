//! GPT-2's reversible map between bytes and printable characters.
//!
//! `tokenizer.json` stores tokens as strings, but byte-level BPE tokens are arbitrary byte
//! sequences. GPT-2 (and HuggingFace's `ByteLevel` pre-tokenizer) maps each of the 256 byte
//! values to one printable Unicode character: the 188 bytes that are already printable and
//! not whitespace (`!`..`~`, `¡`..`¬`, `®`..`ÿ`) map to themselves, and the remaining 68 are
//! shifted to U+0100.. in byte order. So the space byte 0x20 becomes `Ġ` (U+0120) and the
//! newline 0x0A becomes `Ċ` (U+010A).
//!
//! Example: the token bytes `b" the"` are written as `"Ġthe"`.

use std::sync::OnceLock;

/// Whether byte `b` maps to the character of the same code point.
fn maps_to_itself(b: u8) -> bool {
    matches!(b, b'!'..=b'~' | 0xA1..=0xAC | 0xAE..=0xFF)
}

/// The byte → character table (`bytes_to_unicode` in GPT-2's `encoder.py`).
pub fn byte_to_char_table() -> &'static [char; 256] {
    static TABLE: OnceLock<[char; 256]> = OnceLock::new();
    TABLE.get_or_init(build_table)
}

fn build_table() -> [char; 256] {
    let mut table = ['\0'; 256];
    let mut shifted = 0u32;
    for b in 0..=255u8 {
        table[b as usize] = if maps_to_itself(b) {
            char::from(b)
        } else {
            shifted += 1;
            char::from_u32(255 + shifted).expect("U+0100..U+0143 are valid chars")
        };
    }
    table
}

/// The character a byte is written as.
pub fn byte_to_char(b: u8) -> char {
    byte_to_char_table()[b as usize]
}

/// The byte a character stands for, or `None` if it is not one of the 256 byte characters.
pub fn char_to_byte(c: char) -> Option<u8> {
    let cp = c as u32;
    if cp < 256 && maps_to_itself(cp as u8) {
        return Some(cp as u8);
    }
    if (256..256 + 68).contains(&cp) {
        // The shifted bytes, in byte order: the (cp-256)-th byte that does not map to itself.
        static SHIFTED: OnceLock<Vec<u8>> = OnceLock::new();
        let shifted = SHIFTED.get_or_init(|| (0..=255u8).filter(|&b| !maps_to_itself(b)).collect());
        return Some(shifted[(cp - 256) as usize]);
    }
    None
}

/// Writes token bytes in byte-level form: `b" the"` → `"Ġthe"`.
pub fn bytes_to_token_string(bytes: &[u8]) -> String {
    let table = byte_to_char_table();
    bytes.iter().map(|&b| table[b as usize]).collect()
}

/// Reads a byte-level token string back into bytes; `None` if a character is not a byte
/// character.
pub fn token_string_to_bytes(token: &str) -> Option<Vec<u8>> {
    token.chars().map(char_to_byte).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_map_is_a_bijection_onto_256_chars() {
        let table = byte_to_char_table();
        let mut seen = std::collections::HashSet::new();
        for b in 0..=255u8 {
            assert!(seen.insert(table[b as usize]));
            assert_eq!(char_to_byte(table[b as usize]), Some(b));
            assert_eq!(byte_to_char(b), table[b as usize]);
        }
    }

    #[test]
    fn space_and_newline_map_to_gpt2_characters() {
        assert_eq!(byte_to_char(b' '), 'Ġ');
        assert_eq!(byte_to_char(b'\n'), 'Ċ');
        assert_eq!(byte_to_char(b'a'), 'a');
        assert_eq!(char_to_byte('x'), Some(b'x'));
        assert_eq!(char_to_byte('€'), None);
    }
}
