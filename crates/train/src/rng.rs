//! A small deterministic random generator (SplitMix64) whose whole state is one `u64`.
//!
//! Every random stream of a run (data generation, batch offsets, dropout seeds) is derived
//! from `(seed, purpose, step)` with [`Rng::derive`], so a resumed run draws exactly what an
//! uninterrupted one draws without saving any generator state (docs/burn.md: Burn's own
//! generator can be seeded but not saved).

/// SplitMix64 (Steele, Lea, Flood 2014): passes BigCrush, one `u64` of state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rng {
    state: u64,
}

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng { state: seed }
    }

    /// A generator for one purpose and step, independent of every other `(purpose, step)`.
    pub fn derive(seed: u64, purpose: &str, step: u64) -> Self {
        let mut h = Rng::new(seed ^ 0x9E37_79B9_7F4A_7C15);
        for b in purpose.bytes() {
            h.state ^= u64::from(b);
            h.next_u64();
        }
        h.state ^= step.wrapping_mul(0xD1B5_4A32_D192_ED03);
        h.next_u64();
        h
    }

    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `[0, 1)` with 53 bits.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in `0..n` (`n > 0`), by rejection, so without bias.
    pub fn below(&mut self, n: u64) -> u64 {
        assert!(n > 0, "below(0)");
        let zone = u64::MAX - u64::MAX % n;
        loop {
            let x = self.next_u64();
            if x < zone {
                return x % n;
            }
        }
    }

    /// An index drawn from unnormalized non-negative `weights` (not all zero).
    pub fn weighted(&mut self, weights: &[f64]) -> usize {
        let total: f64 = weights.iter().sum();
        let mut x = self.next_f64() * total;
        for (i, &w) in weights.iter().enumerate() {
            if x < w {
                return i;
            }
            x -= w;
        }
        weights.iter().rposition(|&w| w > 0.0).expect("some positive weight")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn derived_streams_are_reproducible_and_distinct() {
        let a = Rng::derive(7, "batch", 3).next_u64();
        assert_eq!(a, Rng::derive(7, "batch", 3).next_u64());
        assert_ne!(a, Rng::derive(7, "batch", 4).next_u64());
        assert_ne!(a, Rng::derive(7, "dropout", 3).next_u64());
        assert_ne!(a, Rng::derive(8, "batch", 3).next_u64());
    }

    #[test]
    fn below_stays_in_range_and_covers_it() {
        let mut r = Rng::new(1);
        let mut seen = [false; 5];
        for _ in 0..200 {
            seen[r.below(5) as usize] = true;
        }
        assert!(seen.iter().all(|&s| s));
    }
}
