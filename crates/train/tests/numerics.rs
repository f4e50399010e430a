//! Our loss, gradients, global-norm clipping and AdamW step (nanoGPT's decay groups) against
//! PyTorch's on the same weights and batch: the tiny GPT-2 fixture imported, one step taken,
//! compared with `fixtures/gpt2-tiny/numerics.safetensors` (made by `make_numerics.py`).

use std::collections::HashMap;
use std::path::Path;

use attend_model::DecoderOnly;
use attend_train::average::load_model;
use attend_train::clip::clip_global_norm;
use attend_train::config::{OptimizerKind, RunConfig};
use attend_train::finetune::named_values;
use attend_train::import::import_gpt2;
use attend_train::objective::cross_entropy;
use attend_train::optimizer::Optim;
use burn::module::{AutodiffModule, Module, ModuleMapper, Param};
use burn::optim::GradientsParams;
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::{Int, Tensor, TensorData};
use safetensors::SafeTensors;

type B = burn::backend::Autodiff<burn_ndarray::NdArray<f32>>;
type I = burn_ndarray::NdArray<f32>;

fn fixture() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/gpt2-tiny")
}

/// A copy of the model whose every parameter holds its gradient instead.
struct Gradients<'a>(&'a GradientsParams);

impl<Bk: AutodiffBackend> ModuleMapper<Bk> for Gradients<'_> {
    fn map_float<const D: usize>(&mut self, param: Param<Tensor<Bk, D>>) -> Param<Tensor<Bk, D>> {
        let (id, tensor, mapper) = param.consume();
        let grad = self.0.get::<Bk::InnerBackend, D>(id).expect("every parameter has a gradient");
        Param::from_mapped_value(id, Tensor::from_inner(grad).set_require_grad(tensor.is_require_grad()), mapper)
    }
}

fn close(what: &str, ours: &HashMap<String, Vec<f32>>, theirs: &SafeTensors, prefix: &str, tolerance: f32) {
    for (path, values) in ours {
        let view = theirs.tensor(&format!("{prefix}/{path}")).unwrap_or_else(|_| panic!("{prefix}/{path} missing"));
        let want: Vec<f32> = view.data().chunks(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect();
        assert_eq!(values.len(), want.len(), "{path}");
        let worst = values.iter().zip(&want).map(|(a, b)| (a - b).abs()).fold(0.0f32, f32::max);
        assert!(worst < tolerance, "{what} of {path}: differs by {worst}");
    }
}

fn host<M: Module<I>>(module: &M) -> HashMap<String, Vec<f32>> {
    named_values(module).into_iter().map(|(p, d)| (p, d.to_vec::<f32>().unwrap())).collect()
}

#[test]
fn loss_gradients_clipping_and_an_adamw_step_equal_pytorch_s() {
    // Model initialization draws from Burn's one global generator: take turns with the
    // tests that train (`common::serial`).
    let _turn = crate::common::serial();
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    import_gpt2::<I>(&fixture(), &run, &Default::default()).unwrap();
    let mut config = RunConfig::from_resolved(&run.join("config.toml")).unwrap();
    let t = &mut config.train;
    (t.optimizer, t.lr, t.beta1, t.beta2, t.eps, t.weight_decay) = (OptimizerKind::Adamw, 1e-3, 0.9, 0.95, 1e-8, 0.1);
    let device = Default::default();
    let model: DecoderOnly<B> = load_model(&config.model, 280, &run.join("best"), &device).unwrap();

    let expected: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(fixture().join("expected.json")).unwrap()).unwrap();
    let ids: Vec<i64> = expected["ids"].as_array().unwrap().iter().map(|v| v.as_i64().unwrap()).collect();
    let rows = |from: usize| [&ids[from..from + 15], &ids[from + 16..from + 31]].concat();
    let x = Tensor::<B, 2, Int>::from_data(TensorData::new(rows(0), [2, 15]), &device);
    let y = Tensor::<B, 2, Int>::from_data(TensorData::new(rows(1), [2, 15]), &device);
    let losses = cross_entropy(model.forward(x.clone()), y.clone(), None, 0.0);

    let numbers: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(fixture().join("numerics.json")).unwrap()).unwrap();
    let loss = losses.objective.clone().into_scalar() as f64;
    assert!((loss - numbers["loss"].as_f64().unwrap()).abs() < 1e-6, "loss {loss} vs {}", numbers["loss"]);

    let bytes = std::fs::read(fixture().join("numerics.safetensors")).unwrap();
    let theirs = SafeTensors::deserialize(&bytes).unwrap();
    let mut grads = GradientsParams::from_grads(losses.objective.backward(), &model);
    close("gradient", &host(&model.clone().map(&mut Gradients(&grads)).valid()), &theirs, "grad", 1e-6);

    clip_global_norm(&model, &mut grads, 0.5);
    close("clipped gradient", &host(&model.clone().map(&mut Gradients(&grads)).valid()), &theirs, "clipped", 1e-6);
    // The optimizer takes the clipping factor (AdamW multiplies it into its update): from the
    // unclipped gradients of the same loss it takes PyTorch's step. (On Adam's first step the
    // factor moves the update by about 1e-9, under this tolerance: `optimizer.rs`'s tests hold
    // the factor itself to account.)
    let grads = GradientsParams::from_grads(cross_entropy(model.forward(x), y, None, 0.0).objective.backward(), &model);
    let mut optim = Optim::<B, DecoderOnly<B>>::new(&config.train);
    let factor = attend_train::clip::clip_factor(&model, &grads, 0.5);
    let updated = optim.step(1, 1e-3, model, grads, factor);
    close("updated weight", &host(&updated.valid()), &theirs, "updated", 1e-6);
}
