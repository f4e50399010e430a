//! `attention` and `positions`: a trained model's attention weights on a text, one SVG per
//! layer with the heads side by side and the tokens on both axes (rows attend to columns),
//! like the paper's attention figures; and positional encodings as a picture (the
//! sinusoids of section 3.5, or a run's learned table).
//!
//! Language models draw their (causal, or for a masked LM bidirectional) self-attention,
//! `layer-N.svg`. Translation models draw `encoder-layer-N.svg` (source × source),
//! `decoder-self-layer-N.svg` (target × target) and `decoder-cross-layer-N.svg`
//! (target × source), the target being `<s>` followed by `--text` (teacher forcing).

use std::path::{Path, PathBuf};

use attend_model::{positions::sinusoid_table, DecoderOnly, LanguageModel};
use burn::tensor::backend::Backend;
use burn::tensor::{Int, Tensor, TensorData};

use crate::average::load_weights;
use crate::config::RunConfig;
use crate::data::codec::LmCodec;
use crate::data::mt_dataset::IDS;
use crate::error::{io_err, PromptError, TrainError};
use crate::heatmap::{svg, token_label, Panel, Scale};
use crate::trained::{load_lm, weights_dir};
use crate::translate::load_mt_run;

const CELL: f32 = 14.0;

fn ids_tensor<B: Backend>(ids: &[u32], device: &B::Device) -> Tensor<B, 2, Int> {
    Tensor::from_data(TensorData::new(ids.iter().map(|&i| i as i64).collect::<Vec<_>>(), [1, ids.len()]), device)
}

/// An error unless a text of `len` tokens (`flag`'s) fits the model's positions: at most
/// `limit` (`model.block_size`) where there is one.
fn fits(flag: &str, len: usize, limit: Option<usize>) -> Result<(), TrainError> {
    match limit {
        Some(limit) if len > limit => Err(TrainError::Usage(format!(
            "{flag} is {len} tokens long, and this model takes at most {limit} (model.block_size): give a shorter text"
        ))),
        _ => Ok(()),
    }
}

/// One panel per head of `weights` (`[1, heads, rows, cols]`).
fn heads<B: Backend>(weights: Tensor<B, 4>, rows: &[String], cols: &[String]) -> Vec<Panel> {
    let [_, h, r, c] = weights.dims();
    let values = weights.into_data().convert::<f32>().to_vec::<f32>().unwrap_or_default();
    (0..h)
        .map(|i| Panel {
            title: format!("head {}", i + 1),
            rows: rows.to_vec(),
            cols: cols.to_vec(),
            values: values[i * r * c..(i + 1) * r * c].to_vec(),
        })
        .collect()
}

fn write(out: &Path, name: &str, title: &str, panels: &[Panel], scale: Scale) -> Result<PathBuf, TrainError> {
    let path = out.join(name);
    let picture = svg(title, panels, scale, CELL).map_err(io_err(&path))?;
    crate::whole_file::write_whole(&path, picture).map_err(io_err(&path))?;
    Ok(path)
}

/// One file per layer of `weights`, `{name}-{N}.svg`, titled `{what}, layer N`.
fn layers<B: Backend>(
    out: &Path,
    name: &str,
    what: &str,
    weights: Vec<Tensor<B, 4>>,
    rows: &[String],
    cols: &[String],
) -> Result<Vec<PathBuf>, TrainError> {
    let mut files = Vec::with_capacity(weights.len());
    for (i, w) in weights.into_iter().enumerate() {
        let title = format!("{what}, layer {}", i + 1);
        files.push(write(out, &format!("{name}-{}.svg", i + 1), &title, &heads(w, rows, cols), Scale::Unit)?);
    }
    Ok(files)
}

/// Draws the attention of the model in `run` on `text` (and `source` for translation) into `out`.
pub fn attention<B: Backend>(
    run: &Path,
    text: &str,
    source: Option<&str>,
    out: &Path,
    device: &B::Device,
) -> Result<Vec<PathBuf>, TrainError> {
    let config = RunConfig::from_resolved(&run.join("config.toml"))?;
    std::fs::create_dir_all(out).map_err(io_err(out))?;
    if source.is_some() && config.model.arch != attend_model::Arch::Seq2seq {
        return Err(TrainError::Usage(format!(
            "--source is the sentence a translation model translates (model.arch = \"seq2seq\"); {} holds model.arch = \"{}\": drop --source",
            run.display(),
            format!("{:?}", config.model.arch).to_lowercase()
        )));
    }
    let empty = || TrainError::Prompt(PromptError::Empty("--text"));
    let mut files = Vec::new();
    match config.model.arch {
        attend_model::Arch::Seq2seq => {
            let source = source.ok_or_else(|| {
                TrainError::Usage("--source is required for a translation model (the sentence to translate)".into())
            })?;
            let trained = load_mt_run::<B>(run, device)?;
            let label = |i: &u32| match *i {
                i if i == IDS.bos => "<s>".to_string(),
                i if i == IDS.eos => "</s>".to_string(),
                i => token_label(&trained.tokenizer.decode(&[i])),
            };
            let src: Vec<u32> = trained.tokenizer.encode(source).into_iter().chain([IDS.eos]).collect();
            let tgt: Vec<u32> = [IDS.bos].into_iter().chain(trained.tokenizer.encode(text)).collect();
            // Learned positions end at the table's last row; sinusoids take any length.
            let limit = trained.model.positions.max_len();
            fits("--source (with its </s>)", src.len(), limit)?;
            fits("--text (with its <s>)", tgt.len(), limit)?;
            let (src_labels, tgt_labels): (Vec<String>, Vec<String>) =
                (src.iter().map(label).collect(), tgt.iter().map(label).collect());
            let output = trained.model.forward_with_attention(ids_tensor(&src, device), None, ids_tensor(&tgt, device));
            let (src, tgt) = (&src_labels, &tgt_labels);
            files.extend(layers(out, "encoder-layer", "encoder self-attention", output.encoder_weights, src, src)?);
            files.extend(layers(
                out,
                "decoder-self-layer",
                "decoder self-attention",
                output.decoder_self_weights,
                tgt,
                tgt,
            )?);
            let cross = output.decoder_cross_weights;
            files.extend(layers(out, "decoder-cross-layer", "encoder-decoder attention", cross, tgt, src)?);
        }
        attend_model::Arch::Encoder => {
            let codec = LmCodec::load(run)?;
            let ids =
                codec.encode_prompt(text).map_err(|s| TrainError::Prompt(PromptError::UnknownSymbol("--text", s)))?;
            if ids.is_empty() {
                return Err(empty());
            }
            let model_config = attend_model::ModelConfig { dropout: 0.0, ..config.model.clone() };
            let model: LanguageModel<B> =
                load_weights(model_config.init_lm(codec.len(), device), &weights_dir(run)?, device)?;
            fits("--text", ids.len(), model.positions.max_len())?;
            let labels: Vec<String> = ids.iter().map(|&i| token_label(&codec.decode(&[i]))).collect();
            let weights = model.forward_bidirectional(ids_tensor(&ids, device)).1;
            files = layers(out, "layer", "bidirectional self-attention", weights, &labels, &labels)?;
        }
        _ => {
            let trained = load_lm::<B>(run, device)?;
            let ids = trained
                .codec
                .encode_prompt(text)
                .map_err(|s| TrainError::Prompt(PromptError::UnknownSymbol("--text", s)))?;
            if ids.is_empty() {
                return Err(empty());
            }
            // A language model's context is its block, whatever its positions.
            fits("--text", ids.len(), Some(config.model.block_size))?;
            let labels: Vec<String> = ids.iter().map(|&i| token_label(&trained.codec.decode(&[i]))).collect();
            let x = ids_tensor(&ids, device);
            let weights = match &trained.model {
                DecoderOnly::Gpt(m) => m.forward_with_attention(x).1,
                DecoderOnly::Notes(m) => vec![m.forward_cached(x, &mut m.empty_cache()).1],
            };
            files = layers(out, "layer", "causal self-attention", weights, &labels, &labels)?;
        }
    }
    Ok(files)
}

/// The sinusoidal encodings `P[t, i]` of `len` positions and `d_model` dimensions.
pub fn sinusoid_panel(d_model: usize, len: usize) -> Panel {
    Panel {
        title: format!("sinusoidal positions: P[t, 2i] = sin(t / 10000^(2i/{d_model})), P[t, 2i+1] = cos(…)"),
        rows: (0..len).map(|t| t.to_string()).collect(),
        cols: (0..d_model).map(|i| i.to_string()).collect(),
        values: sinusoid_table(0, len, d_model),
    }
}

/// A run's learned position table, its first `len` positions (all when `None`).
pub fn learned_panel<B: Backend>(run: &Path, len: Option<usize>, device: &B::Device) -> Result<Panel, TrainError> {
    let trained = load_lm::<B>(run, device)?;
    let DecoderOnly::Gpt(model) = &trained.model else { return Err(TrainError::NotLm) };
    let table = model.positions.learned.as_ref().ok_or_else(|| {
        TrainError::Usage(format!(
            "{}: its positions are not learned (model.positions); drop --run for the sinusoids",
            run.display()
        ))
    })?;
    let [rows, d] = table.val().dims();
    if let Some(len) = len.filter(|&len| len > rows) {
        return Err(TrainError::Usage(format!(
            "--len {len}: the learned table of {} has {rows} positions (model.block_size)",
            run.display()
        )));
    }
    let rows = len.unwrap_or(rows);
    let values = table.val().slice([0..rows, 0..d]).into_data().convert::<f32>().to_vec::<f32>().unwrap_or_default();
    Ok(Panel {
        title: format!("learned positions of {}", run.display()),
        rows: (0..rows).map(|t| t.to_string()).collect(),
        cols: (0..d).map(|i| i.to_string()).collect(),
        values,
    })
}

/// Writes one panel of positions to `out` (blue negative, red positive).
pub fn write_positions(panel: &Panel, out: &Path) -> Result<(), TrainError> {
    let cell = (900.0 / panel.cols.len().max(panel.rows.len()) as f32).clamp(2.0, 14.0);
    let title = "positional encodings (rows: position t; columns: dimension)";
    let picture = svg(title, std::slice::from_ref(panel), Scale::Signed, cell).map_err(io_err(out))?;
    crate::whole_file::write_whole(out, picture).map_err(io_err(out))
}

#[cfg(test)]
mod tests {
    use super::fits;

    #[test]
    fn a_text_longer_than_the_positions_is_refused_naming_the_flag_and_the_limit() {
        assert!(fits("--text", 12, Some(12)).is_ok(), "as long as the block");
        assert!(fits("--source", 5000, None).is_ok(), "sinusoids take any length");
        let err = fits("--source (with its </s>)", 13, Some(12)).unwrap_err().to_string();
        assert!(err.contains("--source (with its </s>) is 13 tokens long") && err.contains("at most 12"), "{err}");
    }
}
