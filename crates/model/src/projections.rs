//! How self-attention's three projections `x W^Q`, `x W^K`, `x W^V` run: as one product of
//! `x` with `[W^Q | W^K | W^V]`, or as three. The environment variable `ATTEND_QKV`:
//! `auto` (unset: the default), `separate` or `merged`.
//!
//! One product is one pass over `x` forward, and one `dx` product and one weight gradient
//! `xᵀ·[dQ | dK | dV]` backward instead of three of each. What it costs depends on how
//! attention reads its output:
//! - **On the CPU backend** attention reads the product's rows in place and writes their
//!   gradient in the same layout ([`crate::fused::attention_packed`]; without a cache, through
//!   [`crate::attention::MultiHeadAttention::self_attention`], for layers without adapters,
//!   without dropout on the weights, and with a bias on all three projections or none:
//!   `MultiHeadAttention::packs`). `auto` and `merged` take it:
//!   on nanoGPT's CPU model a layer's projections took 260 µs forward and 450 µs backward
//!   against 320 and 590 µs as three products, whose three `dx` Burn's autodiff adds in two
//!   serial passes (docs/benchmarks.md).
//! - **On the GPU backends** the product is sliced into three tensors, and the backward of
//!   each slice is a zero-filled tensor, a slice assignment and a sum. Three products are
//!   faster there (`auto` and `separate`): nanoGPT's GPU configuration on an H200 ran 202.6k
//!   tokens/s separate against 185.9k merged in the same call (CubeCL's product of
//!   `[16384, 384]·[384, 1152]` is slow too). `merged` slices, for timing it on other
//!   hardware.
//!
//! The parameters stay three `Linear`s either way: checkpoints and exports do not change.

/// The setting of `ATTEND_QKV`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Projections {
    /// `auto` (the default): one product read in place on the CPU backend, three elsewhere.
    Auto,
    /// `separate`: three products.
    Separate,
    /// `merged`: one product (sliced into three on the GPU backends, and on the CPU where it
    /// is not read in place: with a cache).
    Merged,
}

/// The values `ATTEND_QKV` takes, for its errors.
const EXPECTED: &str = "auto (the default), separate or merged";

/// `ATTEND_QKV` read: unset, or a value [`parse_projections`] takes.
pub fn projections_from_env() -> Result<Projections, String> {
    crate::env_switch::read("ATTEND_QKV", Projections::Auto, EXPECTED, parse_projections)
}

/// A value of `ATTEND_QKV`: `auto` (or empty), `separate`, `merged`; anything else is an error
/// that names the variable and the values it takes.
pub fn parse_projections(value: &str) -> Result<Projections, String> {
    let choices = [
        ("", Projections::Auto),
        ("auto", Projections::Auto),
        ("separate", Projections::Separate),
        ("merged", Projections::Merged),
    ];
    crate::env_switch::parse("ATTEND_QKV", value, &choices, EXPECTED)
}

/// Whether self-attention's projections are one product sliced into three (`merged`; on the
/// CPU backend self-attention without a cache reads it in place instead, [`packs`]).
pub(crate) fn merges() -> bool {
    setting() == Projections::Merged
}

/// Whether self-attention without a cache reads one product in place: on the CPU backend
/// (`B` burn-ndarray in f32, with or without autodiff) unless `separate`.
pub(crate) fn packs<B: 'static>() -> bool {
    crate::fused::is_cpu_backend::<B>() && setting() != Projections::Separate
}

/// The tests' choice on this thread, else the environment's, read once (a value the runner
/// would refuse runs `auto` here, said on stderr; `xtask` checks it before a run).
fn setting() -> Projections {
    static ENV: std::sync::OnceLock<Projections> = std::sync::OnceLock::new();
    #[cfg(test)]
    if let Some(setting) = TEST_PROJECTIONS.with(|p| p.get()) {
        return setting;
    }
    *ENV.get_or_init(|| crate::env_switch::or_default(projections_from_env(), Projections::Auto, "auto"))
}

#[cfg(test)]
thread_local! {
    /// The tests' choice of [`Projections`] on this thread (`None`: the environment's).
    pub(crate) static TEST_PROJECTIONS: std::cell::Cell<Option<Projections>> = const { std::cell::Cell::new(None) };
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::attention::MultiHeadAttention;
    use crate::config::ModelConfig;
    use burn::backend::Autodiff;
    use burn::tensor::backend::AutodiffBackend;
    use burn::tensor::{Distribution, Tensor, TensorData};
    use burn_ndarray::NdArray;

    type Ad = Autodiff<NdArray<f32>>;

    #[test]
    fn projections_setting_takes_auto_separate_and_merged_and_names_the_variable_on_anything_else() {
        assert_eq!(parse_projections(""), Ok(Projections::Auto));
        assert_eq!(parse_projections("auto"), Ok(Projections::Auto));
        assert_eq!(parse_projections(" separate"), Ok(Projections::Separate));
        assert_eq!(parse_projections("merged"), Ok(Projections::Merged));
        for wrong in ["yes", "packed"] {
            let error = parse_projections(wrong).unwrap_err();
            assert!(error.contains("ATTEND_QKV") && error.contains("merged") && error.contains(wrong), "{error}");
        }
    }

    #[test]
    fn only_the_merged_setting_merges() {
        let with = |setting| {
            TEST_PROJECTIONS.with(|p| p.set(Some(setting)));
            let merges = merges();
            TEST_PROJECTIONS.with(|p| p.set(None));
            merges
        };
        assert!(!with(Projections::Separate));
        assert!(!with(Projections::Auto));
        assert!(with(Projections::Merged));
    }

    /// Reading one product in place is the CPU backend's default and `merged`'s, never
    /// `separate`'s, and not a backend's without the CPU kernels (burn-ndarray in f64).
    #[test]
    fn only_the_cpu_backend_packs_and_not_when_separate() {
        let with = |setting, cpu: bool| {
            TEST_PROJECTIONS.with(|p| p.set(Some(setting)));
            let packs = if cpu { packs::<Ad>() } else { packs::<Autodiff<NdArray<f64>>>() };
            TEST_PROJECTIONS.with(|p| p.set(None));
            packs
        };
        assert!(with(Projections::Auto, true) && with(Projections::Merged, true));
        assert!(!with(Projections::Separate, true));
        assert!(!with(Projections::Auto, false) && !with(Projections::Merged, false));
    }

    /// The loss `Σ q + Σ k + Σ v²`, and the gradients of `x` and of the three weights (and
    /// biases), from one of the two forms, for the layer and input given.
    pub(crate) fn projected<B: AutodiffBackend>(
        attention: &MultiHeadAttention<B>,
        x: TensorData,
        merged: bool,
    ) -> Vec<Vec<f32>> {
        let x = Tensor::<B, 3>::from_data(x, &attention.query.weight.device()).require_grad();
        let (q, kv) =
            if merged { attention.merged_projections(x.clone()) } else { attention.separate_projections(x.clone()) };
        let loss = q.clone().sum() + kv.keys.clone().sum() + kv.values.clone().powi_scalar(2).sum();
        let grads = loss.backward();
        let values = |t: TensorData| t.convert::<f32>().to_vec::<f32>().unwrap();
        let mut out = vec![values(q.into_data()), values(kv.keys.into_data()), values(kv.values.into_data())];
        out.push(values(x.grad(&grads).unwrap().into_data()));
        for layer in [&attention.query, &attention.key, &attention.value] {
            out.push(layer.weight.grad(&grads).unwrap().into_data().convert::<f32>().to_vec().unwrap());
            if let Some(bias) = &layer.bias {
                out.push(bias.grad(&grads).unwrap().into_data().convert::<f32>().to_vec().unwrap());
            }
        }
        out
    }

    /// The largest difference between two [`projected`] results, each output's relative to its
    /// largest magnitude where that exceeds 1, checking that each output has the same length
    /// and is not all zero.
    pub(crate) fn worst_difference(a: &[Vec<f32>], b: &[Vec<f32>]) -> f32 {
        assert_eq!(a.len(), b.len());
        let mut worst = 0.0f32;
        for (i, (a, b)) in a.iter().zip(b).enumerate() {
            assert_eq!(a.len(), b.len(), "output {i}");
            assert!(a.iter().any(|&g| g != 0.0), "output {i} is all zero");
            let scale = a.iter().fold(1.0f32, |m, v| m.max(v.abs()));
            worst = a.iter().zip(b).map(|(a, b)| (a - b).abs() / scale).fold(worst, f32::max);
        }
        worst
    }

    /// One product of `x` with the concatenated weights gives the three projections, and the
    /// gradients of `x` and of each weight and bias, that three products give (with and
    /// without biases; `d_v` apart from `d_k`, as Table 3's rows set them).
    #[test]
    fn merged_projections_equal_three_products_in_values_and_gradients() {
        for (bias, d_k, d_v) in [(false, 0, 0), (true, 3, 5)] {
            let config = ModelConfig { d_model: 8, n_heads: 2, bias, d_k, d_v, ..ModelConfig::base() };
            let device = Default::default();
            let attention = MultiHeadAttention::<Ad>::new(&config, &device);
            let x = Tensor::<Ad, 3>::random([2, 5, config.d_model], Distribution::Default, &device).into_data();
            let separate = projected(&attention, x.clone(), false);
            assert_eq!(separate.len(), if bias { 10 } else { 7 });
            let worst = worst_difference(&separate, &projected(&attention, x, true));
            assert!(worst < 1e-5, "merged and separate differ by {worst}");
        }
    }
}
