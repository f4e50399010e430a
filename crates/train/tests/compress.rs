//! `compress` / `decompress`: a lossless round trip (BPE and characters, past the context
//! window), a code near the model's own cross-entropy, and a file made with other weights, cut
//! or damaged refused (the first format, without the text's hash, still read).

use std::path::Path;
use std::sync::atomic::AtomicBool;

use attend_train::compress::{compress, decompress};
use attend_train::config::RunConfig;
use attend_train::tasks::train_lm;
use attend_train::RunOptions;

use crate::common;
use common::serial;

type B = burn::backend::Autodiff<burn_ndarray::NdArray<f32>>;
type I = burn_ndarray::NdArray<f32>;

struct Quiet;
impl attend_train::Observer for Quiet {}

fn train(dir: &Path, name: &str, tokenizer: &str, vocab: usize) -> std::path::PathBuf {
    let text = dir.join("text.txt");
    std::fs::write(&text, "the cat sat on the mat; the dog sat on the log.\n".repeat(60)).unwrap();
    let sets: Vec<String> = [
        format!("data.dataset={:?}", text.display().to_string()),
        format!("data.tokenizer={tokenizer}"),
        format!("data.vocab_size={vocab}"),
        "model.d_model=16".into(),
        "model.n_heads=2".into(),
        "model.n_layers=1".into(),
        "model.d_ff=32".into(),
        "model.block_size=8".into(),
        "train.max_steps=40".into(),
        "train.lr=0.02".into(),
        "train.batch_size=8".into(),
        "train.eval_every=40".into(),
        "train.eval_batches=1".into(),
    ]
    .to_vec();
    let run = dir.join(name);
    let opts = RunOptions { run_dir: run.clone(), data_dir: dir.to_path_buf(), resume: false };
    train_lm::<B>(
        &RunConfig::load(None, &sets).unwrap(),
        &opts,
        &Default::default(),
        &mut Quiet,
        &AtomicBool::new(false),
    )
    .unwrap();
    run
}

#[test]
fn compression_round_trips_exactly_near_the_model_bound_and_refuses_other_weights_and_cut_or_damaged_codes() {
    let _turn = serial();
    let dir = tempfile::tempdir().unwrap();
    let chars = train(dir.path(), "chars", "char", 0);
    let bpe = train(dir.path(), "bpe", "bpe", 280);
    // Longer than the 8-token window, and (for BPE) with characters never seen in training.
    let input = "the dog sat on the mat; the cat sat on the log.\n".repeat(4);
    for run in [&chars, &bpe] {
        let (code, stats) = compress::<I>(run, input.as_bytes(), &Default::default()).unwrap();
        assert_eq!(decompress::<I>(run, &code, &Default::default()).unwrap(), input.as_bytes(), "{}", run.display());
        let bits = 8.0 * (code.len() - HEADER) as f64;
        assert!(
            bits < stats.model_bits + 32.0 && bits > stats.model_bits - 32.0,
            "{bits} bits vs {}",
            stats.model_bits
        );
        assert!(
            code.len() - HEADER < input.len() / 3,
            "{} bytes (with the {HEADER}-byte header) for {}",
            code.len(),
            input.len()
        );
    }
    let unseen = "naïve «text»\n";
    let (code, _) = compress::<I>(&bpe, unseen.as_bytes(), &Default::default()).unwrap();
    assert_eq!(decompress::<I>(&bpe, &code, &Default::default()).unwrap(), unseen.as_bytes());
    let err = decompress::<I>(&chars, &code, &Default::default()).unwrap_err().to_string();
    assert!(err.contains("weights hash") && err.matches(char::is_alphanumeric).count() > 128, "{err}");
    let (empty, _) = compress::<I>(&chars, b"", &Default::default()).unwrap();
    assert_eq!(decompress::<I>(&chars, &empty, &Default::default()).unwrap(), b"");
    // A cut code, or a header counting more tokens than were coded (up to 2^62), is an error
    // once decoding runs past the code's end: no allocation from the count, no endless loop.
    let (code, _) = compress::<I>(&chars, input.as_bytes(), &Default::default()).unwrap();
    let cut = &code[..HEADER + (code.len() - HEADER) / 2];
    let err = decompress::<I>(&chars, cut, &Default::default()).unwrap_err().to_string();
    assert!(err.contains("truncated or damaged"), "{err}");
    for count in [input.len() as u64 + 50, 1 << 62] {
        let mut more = code.clone();
        more[37..45].copy_from_slice(&count.to_le_bytes());
        let err = decompress::<I>(&chars, &more, &Default::default()).unwrap_err().to_string();
        assert!(err.contains(&format!("of the {count} tokens")), "{err}");
    }
    // A flipped bit inside the code, or one token more than coded, decodes to another text:
    // the text's hash in the header refuses it.
    let mut flipped = code.clone();
    flipped[HEADER + 2] ^= 0x10;
    let mut one_more = code.clone();
    one_more[37..45].copy_from_slice(&(u64::from_le_bytes(code[37..45].try_into().unwrap()) + 1).to_le_bytes());
    for damaged in [flipped, one_more] {
        match decompress::<I>(&chars, &damaged, &Default::default()) {
            Ok(text) => panic!("a damaged file decoded to {:?}", String::from_utf8_lossy(&text)),
            Err(e) => assert!(e.to_string().contains("damaged"), "{e}"),
        }
    }
    // The first format (no hash of the text) is still read.
    let mut first = [b"ATTZ1".as_slice(), &code[5..45], &code[HEADER..]].concat();
    assert_eq!(decompress::<I>(&chars, &first, &Default::default()).unwrap(), input.as_bytes());
    first.truncate(44);
    assert!(decompress::<I>(&chars, &first, &Default::default())
        .unwrap_err()
        .to_string()
        .contains("no whole ATTZ2 or ATTZ1 header"));
}

/// `ATTZ2`, the weights' hash, the token count, the text's hash.
const HEADER: usize = 5 + 32 + 8 + 8;
