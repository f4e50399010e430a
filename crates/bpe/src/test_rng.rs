//! A seeded xorshift64 for the unit tests' generated text: the same numbers on every machine.

/// The generator's next value each call, from `seed` (not 0).
pub(crate) fn xorshift(mut state: u64) -> impl FnMut() -> u64 {
    move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    }
}
