//! Sampling: temperature, top-k and top-p (nucleus, Holtzman et al. 2019), seeded.
//!
//! The draws come from a SplitMix64 stream seeded by `seed`, consumed row by row, step by
//! step: the same seed, model and prompt give the same text on any backend.

use burn::tensor::{backend::Backend, Int, Tensor};

use super::{argmax, rows, Feeder, IncrementalDecoder};

/// Settings of [`sample`].
#[derive(Clone, Debug, PartialEq)]
pub struct SampleOptions {
    /// Most tokens to generate per row (EOS included).
    pub max_new_tokens: usize,
    /// Logits are divided by it; 0 means greedy (argmax).
    pub temperature: f64,
    /// Keep only the `k` most likely tokens.
    pub top_k: Option<usize>,
    /// Keep the smallest set of most likely tokens whose probability reaches `p`.
    pub top_p: Option<f64>,
    /// Seed of the random stream.
    pub seed: u64,
    /// End-of-sequence token: a row stops after emitting it.
    pub eos: Option<u32>,
}

/// Samples a continuation of each row of `prompt`; returns the generated tokens per row,
/// without the EOS token.
///
/// # Shapes
/// - `prompt`: `[batch, prompt_len]`
pub fn sample<B: Backend, M: IncrementalDecoder<B>>(
    model: &M,
    mut cache: M::Cache,
    prompt: Tensor<B, 2, Int>,
    options: &SampleOptions,
) -> Vec<Vec<u32>> {
    let batch = prompt.dims()[0];
    let mut rng = SplitMix64(options.seed);
    let (mut feeder, mut logits, steps) = Feeder::start(model, &mut cache, prompt, options.max_new_tokens);
    let mut out = vec![Vec::new(); batch];
    let mut done = vec![false; batch];
    for step in 0..steps {
        let next: Vec<u32> = rows(logits).iter().map(|row| draw(row, options, &mut rng) as u32).collect();
        for (b, &token) in next.iter().enumerate() {
            if done[b] {
                continue;
            }
            if Some(token) == options.eos {
                done[b] = true;
            } else {
                out[b].push(token);
            }
        }
        if done.iter().all(|&d| d) || step + 1 == steps {
            break;
        }
        logits = feeder.feed(model, &mut cache, &next);
    }
    out
}

/// The filtered, renormalized next-token distribution of one row of logits:
/// `(token, probability)` pairs, most likely first.
pub fn distribution(logits: &[f32], options: &SampleOptions) -> Vec<(usize, f64)> {
    let temperature = options.temperature;
    let max = logits.iter().fold(f64::NEG_INFINITY, |m, &x| m.max(x as f64));
    let mut probs: Vec<(usize, f64)> =
        logits.iter().enumerate().map(|(i, &x)| (i, ((x as f64 - max) / temperature).exp())).collect();
    probs.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    if let Some(k) = options.top_k {
        probs.truncate(k.max(1));
    }
    let total: f64 = probs.iter().map(|p| p.1).sum();
    probs.iter_mut().for_each(|p| p.1 /= total);
    if let Some(top_p) = options.top_p {
        let mut cumulative = 0.0;
        let keep = probs
            .iter()
            .position(|p| {
                cumulative += p.1;
                cumulative >= top_p
            })
            .map_or(probs.len(), |i| i + 1);
        probs.truncate(keep);
        let total: f64 = probs.iter().map(|p| p.1).sum();
        probs.iter_mut().for_each(|p| p.1 /= total);
    }
    probs
}

fn draw(logits: &[f32], options: &SampleOptions, rng: &mut SplitMix64) -> usize {
    if options.temperature <= 0.0 {
        return argmax(logits);
    }
    let probs = distribution(logits, options);
    let u = rng.next_f64();
    let mut cumulative = 0.0;
    for &(token, p) in &probs {
        cumulative += p;
        if u < cumulative {
            return token;
        }
    }
    probs.last().expect("a non-empty vocabulary").0
}

/// SplitMix64 (Steele, Lea & Flood 2014): a tiny, well-mixed seeded generator.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `[0, 1)` with 53 random bits.
    fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode::greedy::{greedy, GreedyOptions};
    use crate::decode::toy::{prompt, Toy, Watched, A, B, BOS, EOS, TABLE};

    fn options(seed: u64) -> SampleOptions {
        SampleOptions { max_new_tokens: 8, temperature: 1.0, top_k: None, top_p: None, seed, eos: Some(EOS) }
    }

    #[test]
    fn sampling_is_reproducible_from_its_seed() {
        let starts: Vec<&[u32]> = vec![&[BOS]; 16];
        let one = sample(&Toy, Vec::new(), prompt(&starts), &options(7));
        assert_eq!(one, sample(&Toy, Vec::new(), prompt(&starts), &options(7)));
        assert_ne!(one, sample(&Toy, Vec::new(), prompt(&starts), &options(8)));
    }

    #[test]
    fn top_k_one_and_zero_temperature_are_greedy() {
        let starts: Vec<&[u32]> = vec![&[BOS], &[A], &[B]];
        let greedy = greedy(&Toy, Vec::new(), prompt(&starts), &GreedyOptions { max_new_tokens: 8, eos: Some(EOS) });
        let top1 = SampleOptions { top_k: Some(1), ..options(3) };
        assert_eq!(sample(&Toy, Vec::new(), prompt(&starts), &top1), greedy);
        let cold = SampleOptions { temperature: 0.0, ..options(3) };
        assert_eq!(sample(&Toy, Vec::new(), prompt(&starts), &cold), greedy);
    }

    /// From BOS the toy gives a 0.6, b 0.4; at temperature 2 they become ∝ √0.6, √0.4
    /// (0.5505, 0.4495); top-p 0.5 keeps only a.
    #[test]
    fn sampled_frequencies_follow_temperature_and_top_p() {
        let starts: Vec<&[u32]> = vec![&[BOS]; 4000];
        let first_a = |opts: &SampleOptions| {
            let out = sample(&Toy, Vec::new(), prompt(&starts), &SampleOptions { max_new_tokens: 1, ..opts.clone() });
            out.iter().filter(|r| r[0] == A).count() as f64 / out.len() as f64
        };
        assert!((first_a(&options(1)) - 0.6).abs() < 0.03);
        assert!((first_a(&SampleOptions { temperature: 2.0, ..options(2) }) - 0.5505).abs() < 0.03);
        assert_eq!(first_a(&SampleOptions { top_p: Some(0.5), ..options(3) }), 1.0);
        let logits = [-1e9, 0.6f32.ln(), 0.4f32.ln()];
        let kept = |top_p| {
            let dist = distribution(&logits, &SampleOptions { top_p: Some(top_p), ..options(0) });
            dist.iter().map(|p| p.0 as u32).collect::<Vec<_>>()
        };
        assert_eq!(kept(0.7), vec![A, B]);
        assert_eq!(kept(0.6), vec![A]);
    }

    /// One model step per token that is fed, as for greedy: the prompt, then each sampled
    /// token but the last (none after every row has ended).
    #[test]
    fn sampling_steps_the_model_once_per_token_it_feeds() {
        for (rows, steps) in [(vec![BOS], 6), (vec![B], 1)] {
            let watched = Watched::new(1, &TABLE);
            let top1 = SampleOptions { max_new_tokens: 6, top_k: Some(1), ..options(5) };
            let out = sample(&watched, Vec::new(), prompt(&[&rows]), &top1);
            assert_eq!(watched.steps.get(), steps, "from {rows:?}: {out:?}");
        }
    }

    /// What top-p keeps is renormalized: of a 0.6, b 0.3, c 0.1, top-p 0.8 keeps a and b as
    /// 2/3 and 1/3.
    #[test]
    fn top_p_renormalizes_the_tokens_it_keeps() {
        let logits = [0.1f32.ln(), 0.6f32.ln(), 0.3f32.ln()];
        let dist = distribution(&logits, &SampleOptions { top_p: Some(0.8), ..options(0) });
        assert_eq!(dist.iter().map(|p| p.0).collect::<Vec<_>>(), vec![1, 2]);
        assert!((dist[0].1 - 2.0 / 3.0).abs() < 1e-6 && (dist[1].1 - 1.0 / 3.0).abs() < 1e-6, "{dist:?}");
    }

    /// The largest logit is subtracted before `exp`: logits near 400 (whose `exp` of a sum would
    /// overflow f64) give the same probabilities as near 0.
    #[test]
    fn distribution_is_finite_and_shift_free_for_large_logits() {
        let dist = distribution(&[400.0, 400.0 + 3f32.ln()], &options(0));
        assert_eq!(dist.iter().map(|p| p.0).collect::<Vec<_>>(), vec![1, 0]);
        assert!((dist[0].1 - 0.75).abs() < 1e-4 && (dist[1].1 - 0.25).abs() < 1e-4, "{dist:?}");
    }

    /// The outputs of Vigna's reference `splitmix64.c`, three draws each from seed 0 (the often
    /// quoted `0xE220A8397B1DCDAF, …`) and seed 1234567 (checked with a Python transcription).
    #[test]
    fn splitmix64_gives_the_reference_outputs() {
        let mut zero = SplitMix64(0);
        let draws: Vec<u64> = (0..3).map(|_| zero.next_u64()).collect();
        assert_eq!(draws, vec![0xE220_A839_7B1D_CDAF, 0x6E78_9E6A_A1B9_65F4, 0x06C4_5D18_8009_454F]);
        let mut seeded = SplitMix64(1_234_567);
        let draws: Vec<u64> = (0..3).map(|_| seeded.next_u64()).collect();
        assert_eq!(draws, vec![6_457_827_717_110_365_317, 3_203_168_211_198_807_973, 9_817_491_932_198_370_423]);
    }
}
