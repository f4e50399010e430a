//! The CPU kernels of the fused operations against their composed form, through a whole
//! language model at the sizes a real run trains with: `NdArray<f32>` runs our kernels
//! (attention, LayerNorm, GELU, the linear maps, the cross-entropy), `NdArray<f32, i32>` runs
//! the same model composed of Burn's operations (`fused::dispatch` tells them apart by type).
//! The kernels' own tests (`src/fused/tests.rs`) use small shapes (attention up to 17 × 17,
//! heads of 8); these take PTB's model (d_model 256, 4 heads of 64, 3 layers, a block of 64),
//! where the kernels' blocked and vectorized paths run.

use attend_model::config::{Activation, Arch, ModelConfig, NormPosition, Positions};
use attend_model::LanguageModel;
use burn::backend::Autodiff;
use burn::prelude::Backend;
use burn::tensor::activation::log_softmax;
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::{Int, Tensor, TensorData, Tolerance};

mod common;
use common::{carry, gradients};

type Kernels = Autodiff<burn_ndarray::NdArray<f32>>;
type Composed = Autodiff<burn_ndarray::NdArray<f32, i32>>;

const VOCAB: usize = 37;
const LEN: usize = 64;

fn ptb_config(positions: Positions, norm: NormPosition) -> ModelConfig {
    ModelConfig {
        arch: Arch::Lm,
        d_model: 256,
        n_heads: 4,
        n_layers: 3,
        d_ff: 1024,
        dropout: 0.0,
        positions,
        norm,
        activation: Activation::Gelu,
        block_size: LEN,
        ..ModelConfig::base()
    }
}

/// The logits and every parameter's gradient of the mean next-token loss over two rows of
/// `LEN` tokens.
fn logits_and_gradients<B: AutodiffBackend>(lm: &LanguageModel<B>) -> (TensorData, Vec<TensorData>) {
    let device = Default::default();
    let stream: Vec<i64> = (0..2 * (LEN + 1)).map(|i| ((i * 13 + i * i / 7 + 5) % VOCAB) as i64).collect();
    let rows =
        |shift: usize| -> Vec<i64> { (0..2).flat_map(|r| stream[r * (LEN + 1) + shift..][..LEN].to_vec()).collect() };
    let ids = |v: Vec<i64>| Tensor::<B, 2, Int>::from_data(TensorData::new(v, [2, LEN]), &device);
    let logits = lm.forward(ids(rows(0)));
    let loss = log_softmax(logits.clone(), 2).gather(2, ids(rows(1)).unsqueeze_dim(2)).mean().neg();
    let grads = gradients(lm, &loss.backward());
    (logits.into_data(), grads.into_iter().map(|g| g.expect("every parameter gets a gradient")).collect())
}

#[test]
fn cpu_kernels_equal_composed_form_in_lm_logits_and_gradients_at_ptb_sizes() {
    let cases = [
        (Positions::Sinusoidal, NormPosition::Pre),
        (Positions::Learned, NormPosition::Pre),
        (Positions::Learned, NormPosition::Post),
    ];
    for (positions, norm) in cases {
        let config = ptb_config(positions, norm);
        let device = Default::default();
        Kernels::seed(&device, 5);
        let fused = config.init_lm::<Kernels>(VOCAB, &device);
        let composed =
            carry::<Kernels, Composed, _, _>(fused.clone(), config.init_lm::<Composed>(VOCAB, &device), &device);
        let (logits_fused, grads_fused) = logits_and_gradients(&fused);
        let (logits_composed, grads_composed) = logits_and_gradients(&composed);
        let what = format!("{positions:?} positions, {norm:?}-norm");
        logits_fused.assert_approx_eq::<f32>(&logits_composed, Tolerance::rel_abs(1e-4, 1e-5));
        assert_eq!(grads_fused.len(), grads_composed.len(), "{what}: parameter count");
        for (i, (a, b)) in grads_fused.iter().zip(&grads_composed).enumerate() {
            let largest = b.iter::<f32>().fold(0f32, |m, g| m.max(g.abs()));
            assert!(largest > 0.0, "{what}: parameter {i}'s gradient is zero, so the comparison is vacuous");
            // Relative to the parameter's largest gradient: the summation orders differ.
            let diff = a.iter::<f32>().zip(b.iter::<f32>()).fold(0f32, |m, (x, y)| m.max((x - y).abs()));
            // Measured: below 1e-6 of the largest (7e-7 at most, where printed); the keys'
            // biases, whose gradient is 0 in exact arithmetic (softmax ignores a constant
            // added to a row), come out near 1e-9.
            assert!(
                diff <= 1e-5 * largest + 1e-8,
                "{what}: parameter {i}'s gradient differs by {diff} (largest {largest})"
            );
        }
    }
}
