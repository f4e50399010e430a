use burn::module::Module;
use burn::record::{FullPrecisionSettings, NamedMpkFileRecorder};
use burn_ndarray::NdArray;

use super::*;
use crate::config::RunConfig;
use crate::finetune::parameters;

type B = NdArray<f32>;

/// The default run's model (vocabulary 24), saved by Burn's recorder: the file's bytes and the
/// model's parameters.
fn saved_model() -> (Vec<u8>, Vec<crate::finetune::ParamInfo>) {
    let config = RunConfig::load(None, &[]).unwrap();
    let model = config.model.init_lm::<B>(24, &Default::default());
    let expected = parameters(&model);
    let dir = tempfile::tempdir().unwrap();
    model.save_file(dir.path().join("model"), &NamedMpkFileRecorder::<FullPrecisionSettings>::new()).unwrap();
    (std::fs::read(dir.path().join("model.mpk")).unwrap(), expected)
}

/// The byte offset of the MessagePack encoding of `shape` right after the first `bytes` of
/// `len` bytes (Burn writes `bytes`, then `shape`).
fn shape_after(file: &[u8], pattern: &[u8]) -> usize {
    file.windows(pattern.len()).position(|w| w == pattern).expect("pattern in the file")
}

#[test]
fn a_saved_model_scans_to_its_parameters_paths_and_shapes_with_ids() {
    let (file, expected) = saved_model();
    let found = scan(&file).unwrap();
    let ours: Vec<(&str, &[usize])> = found.iter().map(|t| (t.path.as_str(), t.shape.as_slice())).collect();
    let theirs: Vec<(&str, &[usize])> = expected.iter().map(|p| (p.path.as_str(), p.shape.as_slice())).collect();
    assert_eq!(ours, theirs);
    assert!(found.iter().all(|t| t.id.is_some() && t.dtype == "F32" && t.first_non_finite.is_none()));
}

#[test]
fn a_shape_that_disagrees_with_its_bytes_is_refused_naming_the_tensor() {
    let (mut file, _) = saved_model();
    // The embedding is [24, 64]: "shape" then a two-element array of 24 and 64.
    let at = shape_after(&file, b"\xa5shape\x92\x18\x40");
    file[at + 8] = 0x41; // [24, 65]
    let err = scan(&file).unwrap_err();
    assert!(
        err.contains("embedding.weight: shape [24, 65] of F32 needs 6240 bytes, but the record holds 6144"),
        "{err}"
    );
}

#[test]
fn an_enormous_shape_is_refused_without_allocating() {
    let (mut file, _) = saved_model();
    let at = shape_after(&file, b"\xa5shape\x92\x18\x40");
    // [24, 64] → [0xffffffff, 64] through a uint32 would shift the file: use the largest
    // positive fixint in both places instead, and a claimed array length beyond the file.
    file[at + 7] = 0x7f;
    file[at + 8] = 0x7f;
    assert!(scan(&file).unwrap_err().contains("needs 64516 bytes"));
    let mut lying = vec![0xdd, 0xff, 0xff, 0xff, 0xff];
    lying.extend_from_slice(&[0; 8]);
    assert!(scan(&lying).unwrap_err().contains("a length of 4294967295"));
}

#[test]
fn truncation_trailing_bytes_and_deep_nesting_are_refused() {
    let (file, _) = saved_model();
    assert!(scan(&file[..file.len() - 1]).unwrap_err().contains("truncated"));
    let mut longer = file.clone();
    longer.push(0xc0);
    assert!(scan(&longer).unwrap_err().contains("1 bytes after the record's end"));
    let bomb = vec![0x91; 100_000];
    assert!(scan(&bomb).unwrap_err().contains("nested deeper than 64"));
    assert!(scan(&[0xc7, 1, 2, 3]).unwrap_err().contains("type 0xc7"));
}

#[test]
fn a_non_finite_weight_is_found_with_its_index() {
    let (mut file, _) = saved_model();
    // The first float of the embedding's bytes (a bin8/16 header follows the "bytes" key).
    let at = shape_after(&file, b"\xa5bytes\xc5\x18\x00") + 9;
    file[at..at + 4].copy_from_slice(&f32::NAN.to_le_bytes());
    let found = scan(&file).unwrap();
    assert_eq!(found[0].path, "embedding.weight");
    assert_eq!(found[0].first_non_finite, Some(0));
    assert!(found[1..].iter().all(|t| t.first_non_finite.is_none()));
}

/// Found by fuzzing (fuzz/seeds/checkpoint/crash-checkpoint-1-…): an optimizer state whose
/// `Rank1` variant was changed to `Rank0` made Burn panic building a 0-dimensional tensor
/// from 8 values.
#[test]
fn a_rank_variant_that_disagrees_with_the_shape_is_refused() {
    let crash = include_bytes!("../../../../../fuzz/seeds/checkpoint/crash-checkpoint-1-rank0-optimizer.mpk");
    let err = scan(&crash[1..]).unwrap_err();
    assert!(err.contains("a Rank0 record holds a tensor of shape [8]"), "{err}");
}

/// Found by fuzzing (fuzz/seeds/checkpoint/crash-checkpoint-2-…): a parameter id Burn cannot
/// decode made it panic ("Invalid id.") while loading the record.
#[test]
fn a_parameter_id_burn_cannot_decode_is_refused() {
    let crash = include_bytes!("../../../../../fuzz/seeds/checkpoint/crash-checkpoint-2-invalid-id.mpk");
    let err = scan(&crash[1..]).unwrap_err();
    assert!(err.contains("is not one Burn 0.21 writes"), "{err}");
    let (file, _) = saved_model();
    assert!(scan(&file).unwrap().iter().all(|t| is_param_id(t.id.as_ref().unwrap().as_bytes())));
    for bad in ["", "0", "r6u6anitbqgc", "r6u6anitbqgcw", "R6U6ANITBQGCI", "r6u6anitbqgcii", "r6u6anitbqgcj"] {
        assert!(!is_param_id(bad.as_bytes()), "{bad}");
    }
}
