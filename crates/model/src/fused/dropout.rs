//! Dropout (paper section 5.4: on each sub-layer's output and on the embeddings; and on the
//! attention weights where a configuration asks for it): `y = x ⊙ m / (1 − p)` with each
//! `m_i` an independent Bernoulli(1 − p) draw, in training only.
//!
//! On the CPU backend the mask is drawn here, in one parallel pass: Burn 0.21's
//! `random_like(Bernoulli)` builds a sampler for every element and draws each from one
//! ChaCha stream under a lock (about 5% of a Multi30k training step, `docs/benchmarks.md`),
//! and `Dropout::forward` then multiplies twice (by the mask, then by `1/(1 − p)`). Here the
//! kept entries of the mask already hold `1/(1 − p)`, so the forward and the backward are one
//! product each, with the same values: `(x·1)·s` and `x·s` are the same float. The bits come
//! from a counter-based generator (SplitMix64's finalizer over the element's pair index, two
//! 32-bit draws a pair) whose 64-bit key is drawn from the backend's own seeded generator, so
//! a run is as reproducible as before (the training loop reseeds the backend every step, which
//! is what exact resume rests on) and the mask does not depend on the number of threads. The
//! masks differ from Burn's draws; any other backend keeps Burn's `Dropout::forward`.

use burn::nn::Dropout;
use burn::tensor::backend::Backend;
use burn::tensor::{Distribution, Int, Tensor, TensorData};
use rayon::prelude::*;

use super::dispatch::is_cpu_backend;
use super::unwritten::{assume_init, uninit};

/// Elements of the mask per parallel task.
const CHUNK: usize = 1 << 14;

/// `dropout` applied to `x`: `x` itself outside training (a backend without autodiff) or when
/// `p = 0`; on the CPU backend `x ⊙ mask` with the mask of [`keep_mask`]; elsewhere Burn's
/// `Dropout::forward`.
pub fn dropout<B: Backend, const D: usize>(dropout: &Dropout, x: Tensor<B, D>) -> Tensor<B, D> {
    let device = x.device();
    if dropout.prob == 0.0 || !B::ad_enabled(&device) {
        return x;
    }
    if !is_cpu_backend::<B>() {
        return dropout.forward(x);
    }
    let shape = x.shape();
    let mask = keep_mask(draw_key::<B>(&device), shape.num_elements(), 1.0 - dropout.prob);
    x * Tensor::from_data(TensorData::new(mask, shape), &device)
}

/// A 64-bit key from the backend's seeded generator: two uniform draws of 32 bits.
fn draw_key<B: Backend>(device: &B::Device) -> u64 {
    let draws = Tensor::<B, 1, Int>::random([2], Distribution::Uniform(0.0, 4_294_967_296.0), device)
        .into_data()
        .convert::<i64>()
        .into_vec::<i64>()
        .expect("two integers");
    ((draws[0] as u64 & 0xFFFF_FFFF) << 32) | (draws[1] as u64 & 0xFFFF_FFFF)
}

/// SplitMix64's output function of `key + (pair + 1)·γ`: 64 well-mixed bits for each pair.
fn mix(key: u64, pair: u64) -> u64 {
    let mut z = key.wrapping_add(pair.wrapping_add(1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// `n` mask values for keep probability `keep` (in `(0, 1]`) under `key`: element `i` is
/// `1/keep` when its 32-bit draw (the low half of `mix(key, i / 2)` for even `i`, the high half
/// for odd) is below `keep·2³²`, else 0.
pub(crate) fn keep_mask(key: u64, n: usize, keep: f64) -> Vec<f32> {
    let threshold = (keep * 4_294_967_296.0) as u64;
    let scale = (1.0 / keep) as f32;
    let value = |draw: u64| if draw < threshold { scale } else { 0.0 };
    let mut mask = uninit(n);
    mask.par_chunks_mut(CHUNK).enumerate().for_each(|(c, chunk)| {
        let first_pair = (c * CHUNK / 2) as u64;
        for (p, pair) in chunk.chunks_mut(2).enumerate() {
            let bits = mix(key, first_pair + p as u64);
            pair[0].write(value(bits & 0xFFFF_FFFF));
            if let Some(odd) = pair.get_mut(1) {
                odd.write(value(bits >> 32));
            }
        }
    });
    // SAFETY: every chunk's every element was written above.
    unsafe { assume_init(mask) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::backend::Autodiff;
    use burn_ndarray::NdArray;

    type Cpu = Autodiff<NdArray<f32>>;

    #[test]
    fn keep_mask_keeps_about_one_minus_p_and_scales_kept_entries_by_its_inverse() {
        for keep in [0.9, 0.7, 0.5] {
            let n = 200_000;
            let mask = keep_mask(42, n, keep);
            let kept = mask.iter().filter(|&&m| m != 0.0).count() as f64 / n as f64;
            // Binomial standard deviation at n = 200,000 is at most 0.0012: allow 4 of them.
            assert!((kept - keep).abs() < 0.005, "keep {keep}: kept {kept}");
            assert!(mask.iter().all(|&m| m == 0.0 || m == (1.0 / keep) as f32));
            // Neighbours (the two halves of one draw, and consecutive draws) are uncorrelated.
            let both = mask.windows(2).filter(|w| w[0] != 0.0 && w[1] != 0.0).count() as f64 / (n - 1) as f64;
            assert!((both - keep * keep).abs() < 0.006, "keep {keep}: neighbours both kept {both}");
        }
    }

    /// `mix(key, pair)` is output `pair + 1` of SplitMix64 (Steele, Lea & Flood 2014; Vigna's
    /// `splitmix64.c`) seeded with `key`: from key 0, the generator's published first four.
    #[test]
    fn mix_gives_splitmix64s_published_outputs_from_key_zero() {
        let published = [0xE220_A839_7B1D_CDAF, 0x6E78_9E6A_A1B9_65F4, 0x06C4_5D18_8009_454F, 0xF88B_B8A8_724C_81EC];
        let got: Vec<u64> = (0..4).map(|pair| mix(0, pair)).collect();
        assert_eq!(got, published);
    }

    /// Element `i` of a mask is its doc's definition, computed here one element at a time:
    /// the low half of `mix(key, i / 2)` for even `i`, the high half for odd, kept below
    /// `keep·2³²`; over several parallel tasks and a last odd element.
    #[test]
    fn every_mask_element_is_the_draw_of_its_own_index() {
        let (key, keep, n) = (0x0123_4567_89AB_CDEF, 0.6, 3 * CHUNK + 7);
        let threshold = (keep * 4_294_967_296.0) as u64;
        let mask = keep_mask(key, n, keep);
        for (i, &m) in mask.iter().enumerate() {
            let bits = mix(key, (i / 2) as u64);
            let draw = if i % 2 == 0 { bits & 0xFFFF_FFFF } else { bits >> 32 };
            let expected = if draw < threshold { (1.0 / keep) as f32 } else { 0.0 };
            assert_eq!(m, expected, "element {i}");
        }
    }

    /// An element is kept when its draw is strictly below `keep·2³²`: a draw equal to the
    /// threshold is dropped, one below it kept (element 0 under key 0 draws `0x7B1DCDAF`).
    #[test]
    fn a_draw_equal_to_the_threshold_is_dropped() {
        let draw = mix(0, 0) & 0xFFFF_FFFF;
        assert_eq!(draw, 0x7B1D_CDAF);
        let at = draw as f64 / 4_294_967_296.0;
        assert_eq!(keep_mask(0, 1, at), vec![0.0]);
        let above = (draw + 1) as f64 / 4_294_967_296.0;
        assert_eq!(keep_mask(0, 1, above), vec![(1.0 / above) as f32]);
    }

    /// The key holds the backend's two 32-bit draws after a seed: the first in the high half,
    /// the second in the low.
    #[test]
    fn the_key_is_the_backends_two_draws_high_half_first() {
        let device = Default::default();
        Cpu::seed(&device, 11);
        let key = draw_key::<Cpu>(&device);
        Cpu::seed(&device, 11);
        let draws = Tensor::<Cpu, 1, Int>::random([2], Distribution::Uniform(0.0, 4_294_967_296.0), &device)
            .into_data()
            .convert::<i64>()
            .into_vec::<i64>()
            .unwrap();
        assert_eq!((key >> 32, key & 0xFFFF_FFFF), (draws[0] as u64, draws[1] as u64));
        assert_ne!(draws[0], draws[1]);
    }

    /// On the CPU backend a layer's mask is this module's, drawn under the key the backend's
    /// seed gives, not Burn's `Dropout::forward` (whose masks differ).
    #[test]
    fn dropout_on_the_cpu_multiplies_by_the_mask_of_the_seeded_key() {
        let device = Default::default();
        let layer = burn::nn::DropoutConfig::new(0.3).init();
        let values: Vec<f32> = (0..2_000).map(|i| (i % 13) as f32 + 1.0).collect();
        Cpu::seed(&device, 5);
        let key = draw_key::<Cpu>(&device);
        Cpu::seed(&device, 5);
        let x = Tensor::<Cpu, 2>::from_data(TensorData::new(values.clone(), [20, 100]), &device);
        let y = dropout(&layer, x).into_data().to_vec::<f32>().unwrap();
        let mask = keep_mask(key, values.len(), 1.0 - layer.prob);
        let expected: Vec<f32> = values.iter().zip(&mask).map(|(x, m)| x * m).collect();
        assert_eq!(y, expected);
    }

    #[test]
    fn keep_mask_depends_on_the_key_and_not_on_the_chunking() {
        let n = 3 * CHUNK + 7;
        let (a, b) = (keep_mask(1, n, 0.5), keep_mask(2, n, 0.5));
        assert_ne!(a, b);
        assert_eq!(a, keep_mask(1, n, 0.5));
        // Element i of a long mask equals element i of a mask cut short (the draws are a
        // function of the index alone, not of which task wrote them).
        let short = keep_mask(1, CHUNK + 3, 0.5);
        assert_eq!(&a[..CHUNK + 3], &short[..]);
    }

    #[test]
    fn dropout_on_the_cpu_equals_mask_times_input_with_the_same_seed_and_passes_gradients_through_the_mask() {
        let device = Default::default();
        let layer = burn::nn::DropoutConfig::new(0.25).init();
        let values: Vec<f32> = (0..6000).map(|i| (i % 17) as f32 - 8.0).collect();
        let run = || {
            Cpu::seed(&device, 7);
            let x = Tensor::<Cpu, 2>::from_data(TensorData::new(values.clone(), [60, 100]), &device).require_grad();
            let y = dropout(&layer, x.clone());
            let grads = y.clone().sum().backward();
            (y.into_data().to_vec::<f32>().unwrap(), x.grad(&grads).unwrap().into_data().to_vec::<f32>().unwrap())
        };
        let (y, g) = run();
        assert_eq!((y.clone(), g.clone()), run(), "the same seed gives the same mask");
        let scale = (1.0 / 0.75f64) as f32;
        let mut dropped = 0;
        for ((&x, &y), &g) in values.iter().zip(&y).zip(&g) {
            if g == 0.0 {
                dropped += 1;
                assert_eq!(y, 0.0);
            } else {
                assert_eq!(g, scale);
                assert_eq!(y, x * scale);
            }
        }
        assert!((1200..1800).contains(&dropped), "{dropped} of 6000 dropped at p = 0.25");
        // Outside training (no autodiff) dropout is the identity.
        let x = Tensor::<NdArray<f32>, 2>::from_data(TensorData::new(values.clone(), [60, 100]), &device);
        assert_eq!(dropout(&layer, x).into_data().to_vec::<f32>().unwrap(), values);
    }
}
