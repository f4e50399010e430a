//! Whether self-attention's three projections `x W^Q`, `x W^K`, `x W^V` run as one product of
//! `x` with `[W^Q | W^K | W^V]` (`merged`) or as three (`separate`, the default): the
//! environment variable `ATTEND_QKV`.
//!
//! Merged is one pass over `x` forward, and one `dx` product and one weight gradient
//! `xᵀ·[dQ | dK | dV]` backward instead of three of each. It was made the GPU's default when
//! each weight gradient over a batch's 16,384 positions took about 2 ms on an H200 whatever its
//! width; since those gradients are cut into slices of rows (`fused::products::rows_product`)
//! the three products are faster there too: nanoGPT's GPU configuration on an H200 ran
//! 202.6k tokens/s separate against 185.9k merged in the same call (CubeCL's product of
//! `[16384, 384]·[384, 1152]` is slow), and on the CPU 25.5k against 22.5k (the outputs are
//! slices of one tensor, whose backward Burn's autodiff forms as zeros, a slice assignment and
//! a sum for each). So `merged` is opt-in, for timing it on other hardware. The parameters
//! stay three `Linear`s either way: checkpoints and exports do not change.

/// The setting of `ATTEND_QKV`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Projections {
    /// `separate` (the default): three products.
    Separate,
    /// `merged`: one product.
    Merged,
}

/// The values `ATTEND_QKV` takes, for its errors.
const EXPECTED: &str = "separate (the default) or merged";

/// `ATTEND_QKV` read: unset, or a value [`parse_projections`] takes.
pub fn projections_from_env() -> Result<Projections, String> {
    crate::env_switch::read("ATTEND_QKV", Projections::Separate, EXPECTED, parse_projections)
}

/// A value of `ATTEND_QKV`: `separate` (or empty), `merged`; anything else is an error that
/// names the variable and the values it takes.
pub fn parse_projections(value: &str) -> Result<Projections, String> {
    let choices = [("", Projections::Separate), ("separate", Projections::Separate), ("merged", Projections::Merged)];
    crate::env_switch::parse("ATTEND_QKV", value, &choices, EXPECTED)
}

/// Whether self-attention merges its projections: the tests' choice on this
/// thread, else the environment's, read once (a value the runner would refuse counts as
/// `separate` here; `xtask` checks it before a run).
pub(crate) fn merges() -> bool {
    setting() == Projections::Merged
}

fn setting() -> Projections {
    static ENV: std::sync::OnceLock<Projections> = std::sync::OnceLock::new();
    #[cfg(test)]
    if let Some(setting) = TEST_PROJECTIONS.with(|p| p.get()) {
        return setting;
    }
    *ENV.get_or_init(|| projections_from_env().unwrap_or(Projections::Separate))
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
    fn projections_setting_takes_separate_and_merged_and_names_the_variable_on_anything_else() {
        assert_eq!(parse_projections(""), Ok(Projections::Separate));
        assert_eq!(parse_projections(" separate"), Ok(Projections::Separate));
        assert_eq!(parse_projections("merged"), Ok(Projections::Merged));
        for wrong in ["yes", "auto"] {
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
        assert!(with(Projections::Merged));
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
