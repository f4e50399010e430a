//! Arithmetic coding (Witten, Neal & Cleary 1987) with 32-bit integer state: a symbol of
//! cumulative frequencies `[lo, hi)` out of `total` narrows the interval `[low, high]` to its
//! share; leading bits that can no longer change are written out, and a straddling interval
//! around the midpoint is expanded with the bits it owes ("pending") written later. The code
//! length is within 2 bits of `Σ −log₂(freq / total)` plus the rounding of frequencies.
//! `total` must stay below 2^30.

const TOP: u64 = (1 << 32) - 1;
const HALF: u64 = 1 << 31;
const QUARTER: u64 = 1 << 30;

/// The largest frequency total the coder accepts.
pub const MAX_TOTAL: u64 = 1 << 29;

/// Writes bits, most significant first.
#[derive(Default)]
pub struct Encoder {
    low: u64,
    high: u64,
    pending: u64,
    bytes: Vec<u8>,
    bits: u8,
    filled: u8,
}

impl Encoder {
    pub fn new() -> Self {
        Encoder { high: TOP, ..Default::default() }
    }

    fn bit(&mut self, b: bool) {
        self.bits = (self.bits << 1) | b as u8;
        self.filled += 1;
        if self.filled == 8 {
            self.bytes.push(self.bits);
            (self.bits, self.filled) = (0, 0);
        }
    }

    fn emit(&mut self, b: bool) {
        self.bit(b);
        for _ in 0..self.pending {
            self.bit(!b);
        }
        self.pending = 0;
    }

    /// Codes the symbol whose cumulative frequencies are `[lo, hi)` of `total`.
    pub fn encode(&mut self, lo: u64, hi: u64, total: u64) {
        debug_assert!(lo < hi && hi <= total && total <= MAX_TOTAL);
        let range = self.high - self.low + 1;
        self.high = self.low + range * hi / total - 1;
        self.low += range * lo / total;
        loop {
            if self.high < HALF {
                self.emit(false);
            } else if self.low >= HALF {
                self.emit(true);
                self.low -= HALF;
                self.high -= HALF;
            } else if self.low >= QUARTER && self.high < 3 * QUARTER {
                self.pending += 1;
                self.low -= QUARTER;
                self.high -= QUARTER;
            } else {
                break;
            }
            self.low *= 2;
            self.high = self.high * 2 + 1;
        }
    }

    /// The code: enough bits to land inside the final interval, padded with zeros.
    pub fn finish(mut self) -> Vec<u8> {
        self.pending += 1;
        self.emit(self.low >= QUARTER);
        while self.filled != 0 {
            self.bit(false);
        }
        self.bytes
    }
}

/// Reads what [`Encoder`] wrote (bits past the end read as zeros).
pub struct Decoder<'a> {
    low: u64,
    high: u64,
    value: u64,
    bytes: &'a [u8],
    position: usize,
}

impl<'a> Decoder<'a> {
    pub fn new(bytes: &'a [u8]) -> Self {
        let mut d = Decoder { low: 0, high: TOP, value: 0, bytes, position: 0 };
        for _ in 0..32 {
            d.value = (d.value << 1) | d.next_bit();
        }
        d
    }

    /// Whether decoding has read past what a whole code allows: the decoder's position runs 32
    /// bits ahead of the encoder's shifts, and [`Encoder::finish`] writes at least two bits
    /// after the last shift, so a whole code never reads more than 30 bits past its last byte.
    /// A code cut short, or asked for more symbols than were coded, gets there once the bits
    /// it lacks exceed that slack and the zero padding of the last byte (0 to 7 bits): a cut of
    /// a few bits, or a few extra symbols the model finds certain, can go unnoticed.
    pub fn past_end(&self) -> bool {
        self.position > 8 * self.bytes.len() + 30
    }

    fn next_bit(&mut self) -> u64 {
        let byte = self.bytes.get(self.position / 8).copied().unwrap_or(0);
        let bit = (byte >> (7 - self.position % 8)) & 1;
        self.position += 1;
        bit as u64
    }

    /// The cumulative count the next symbol's interval contains (find its symbol, then call
    /// [`Decoder::consume`] with its `[lo, hi)`).
    pub fn target(&self, total: u64) -> u64 {
        let range = self.high - self.low + 1;
        (((self.value - self.low + 1) * total - 1) / range).min(total - 1)
    }

    /// Moves past the symbol of cumulative frequencies `[lo, hi)`.
    pub fn consume(&mut self, lo: u64, hi: u64, total: u64) {
        let range = self.high - self.low + 1;
        self.high = self.low + range * hi / total - 1;
        self.low += range * lo / total;
        loop {
            if self.high < HALF {
            } else if self.low >= HALF {
                self.low -= HALF;
                self.high -= HALF;
                self.value -= HALF;
            } else if self.low >= QUARTER && self.high < 3 * QUARTER {
                self.low -= QUARTER;
                self.high -= QUARTER;
                self.value -= QUARTER;
            } else {
                break;
            }
            self.low *= 2;
            self.high = self.high * 2 + 1;
            self.value = (self.value << 1) | self.next_bit();
        }
    }
}

/// Integer frequencies of a distribution for the coder: `1 + ⌊p·(2^24 − n)⌋` each (never 0,
/// so every symbol stays codable), and their cumulative sums (`n + 1` entries, the last the
/// total). Deterministic in `probs`.
pub fn frequencies(probs: &[f64]) -> Vec<u64> {
    let spare = (1u64 << 24) - probs.len() as u64;
    let mut cumulative = Vec::with_capacity(probs.len() + 1);
    let mut sum = 0u64;
    cumulative.push(0);
    for &p in probs {
        sum += 1 + (p.clamp(0.0, 1.0) * spare as f64) as u64;
        cumulative.push(sum);
    }
    cumulative
}

/// The symbol whose interval in `cumulative` contains `target`.
pub fn symbol_at(cumulative: &[u64], target: u64) -> usize {
    cumulative.partition_point(|&c| c <= target) - 1
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(symbols: &[usize], probs: &[f64]) -> usize {
        let cumulative = frequencies(probs);
        let total = *cumulative.last().unwrap();
        let mut encoder = Encoder::new();
        for &s in symbols {
            encoder.encode(cumulative[s], cumulative[s + 1], total);
        }
        let code = encoder.finish();
        let mut decoder = Decoder::new(&code);
        for &s in symbols {
            let t = decoder.target(total);
            let got = symbol_at(&cumulative, t);
            assert_eq!(got, s);
            decoder.consume(cumulative[got], cumulative[got + 1], total);
            assert!(!decoder.past_end(), "a whole code read past its end");
        }
        code.len()
    }

    #[test]
    fn decoding_more_symbols_than_were_coded_runs_past_the_end() {
        let probs = [0.25; 4];
        let cumulative = frequencies(&probs);
        let total = *cumulative.last().unwrap();
        let mut encoder = Encoder::new();
        for s in [1usize, 3, 0, 2, 2] {
            encoder.encode(cumulative[s], cumulative[s + 1], total);
        }
        let code = encoder.finish();
        let mut decoder = Decoder::new(&code);
        let mut decoded = 0;
        while !decoder.past_end() {
            let got = symbol_at(&cumulative, decoder.target(total));
            decoder.consume(cumulative[got], cumulative[got + 1], total);
            decoded += 1;
            assert!(decoded < 100, "two bits a symbol: past the end within 32 bits");
        }
        assert!(decoded > 5, "the five coded symbols decode first ({decoded})");
    }

    #[test]
    fn every_sequence_decodes_to_itself_and_the_length_is_near_the_entropy() {
        let probs = [0.7, 0.2, 0.05, 0.05];
        let mut state = 12345u64;
        let symbols: Vec<usize> = (0..20_000)
            .map(|_| {
                state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                let u = (state >> 11) as f64 / (1u64 << 53) as f64;
                if u < 0.7 {
                    0
                } else if u < 0.9 {
                    1
                } else if u < 0.95 {
                    2
                } else {
                    3
                }
            })
            .collect();
        let bytes = round_trip(&symbols, &probs);
        let ideal: f64 = symbols.iter().map(|&s| -probs[s].log2()).sum::<f64>() / 8.0;
        assert!((bytes as f64) < ideal * 1.001 + 4.0 && bytes as f64 > ideal * 0.97, "{bytes} bytes, ideal {ideal:.0}");
        // Extremes: a near-certain symbol, and the rarest symbol many times in a row.
        round_trip(&[0; 1000], &[0.999_999, 1e-6]);
        round_trip(&[1; 300], &[0.999_999, 1e-6]);
        assert_eq!(round_trip(&[], &probs), 1);
    }
}
