//! A training case small enough to derive by hand.

use attend_bpe::{Trainer, TrainerConfig};

/// Text `"ab ab ab abc"` with minimum frequency 2.
///
/// Pre-tokenization gives the words `"ab"` ×1, `" ab"` ×2, `" abc"` ×1. Byte ids follow
/// HuggingFace's order (bytes sorted by their byte-level character: `!`..`~` first, so
/// `a` = 64, `b` = 65, `c` = 66, and the space, written `Ġ`, = 220).
///
/// 1. Pair counts: `(a, b)` = 1 + 2 + 1 = 4, `(Ġ, a)` = 2 + 1 = 3, `(b, c)` = 1.
///    Merge `(a, b)` → `ab` = 256.
/// 2. Words are now `[ab]`, `[Ġ ab]` ×2, `[Ġ ab c]`: `(Ġ, ab)` = 3, `(ab, c)` = 1.
///    Merge `(Ġ, ab)` → `Ġab` = 257.
/// 3. Only `(Ġab, c)` = 1 is left, below the minimum of 2: training stops at 258 tokens.
///
/// So `"ab abc"` encodes to `[ab, Ġab, c]` = `[256, 257, 66]`.
#[test]
fn hand_derived_merges_for_ab_ab_ab_abc() {
    let trainer =
        Trainer::new(TrainerConfig { vocab_size: 300, min_frequency: 2, special_tokens: vec![], show_progress: false })
            .unwrap();
    let tok = trainer.train_texts(["ab ab ab abc"]);
    assert_eq!(tok.vocab_size(), 258);
    let merges: Vec<(u32, u32, u32)> = tok.merges().iter().map(|m| (m.left, m.right, m.merged)).collect();
    assert_eq!(merges, [(64, 65, 256), (220, 256, 257)]);
    assert_eq!(tok.encode("ab abc"), [256, 257, 66]);
    assert_eq!(tok.token_bytes(257), Some(b" ab".as_slice()));
}

/// `min_frequency` is inclusive: in `"ab ab"` the pair `(a, b)` occurs twice (`"ab"`, `" ab"`),
/// so it is merged at a minimum of 2 and not at 3.
#[test]
fn a_pair_seen_exactly_min_frequency_times_is_merged() {
    let merges = |min_frequency| {
        let config = TrainerConfig { vocab_size: 300, min_frequency, special_tokens: vec![], show_progress: false };
        let tok = Trainer::new(config).unwrap().train_texts(["ab ab"]);
        tok.merges().iter().map(|m| (m.left, m.right)).collect::<Vec<_>>()
    };
    assert_eq!(merges(2), [(64, 65)]);
    assert_eq!(merges(3), []);
}
