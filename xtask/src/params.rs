//! `cargo xtask params --config FILE`: parameter count and forward FLOPs per token of the
//! configured model, from the configuration alone (nothing is allocated or trained).
//!
//! The file is read exactly as `train` reads it (`RunConfig`: laid over `configs/default.toml`,
//! every section checked strictly, errors naming the key); `[data] vocab_size` gives the
//! vocabulary, so it must be fixed (not 0, "taken from the data").

use std::path::{Path, PathBuf};

use anyhow::{bail, Result};
use attend_model::{count, ModelConfig, ParamReport};
use attend_train::config::RunConfig;
use clap::Args;

#[derive(Args)]
pub struct ParamsArgs {
    /// Experiment configuration (TOML); its `[model]` and `[data] vocab_size` are used.
    #[arg(long)]
    config: PathBuf,
}

pub fn run(args: ParamsArgs) -> Result<()> {
    let (config, vocab_size) = load(&args.config)?;
    let report = count(&config, vocab_size);
    print!("{}", human(&config, vocab_size, &report));
    // The last stdout line, keys in the documented order.
    println!("{{\"params\": {}, \"flops_per_token\": {}}}", report.params, report.flops_per_token);
    Ok(())
}

/// The model configuration and vocabulary size of the file at `path`.
fn load(path: &Path) -> Result<(ModelConfig, usize)> {
    let config = RunConfig::load(Some(path), &[])?;
    if config.data.vocab_size == 0 {
        bail!(
            "{}: data.vocab_size = 0 means \"taken from the data\"; counting parameters needs a fixed vocabulary size",
            path.display()
        );
    }
    Ok((config.model, config.data.vocab_size))
}
fn human(config: &ModelConfig, vocab_size: usize, report: &ParamReport) -> String {
    format!(
        "model: {:?}, d_model {}, {} heads, {} layers, d_ff {}, vocab {}, context {}\n\
         parameters: {} ({:.1}M)\n\
         forward FLOPs per token: {} ({:.2} GFLOP)\n",
        config.arch,
        config.d_model,
        config.n_heads,
        config.n_layers,
        config.d_ff,
        vocab_size,
        config.block_size,
        report.params,
        report.params as f64 / 1e6,
        report.flops_per_token,
        report.flops_per_token as f64 / 1e9,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn committed(name: &str) -> (ModelConfig, usize) {
        load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../configs").join(name)).unwrap()
    }

    /// The configuration text `text`, read as `params --config` reads a file.
    fn resolve(text: &str) -> Result<(ModelConfig, usize)> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("experiment.toml");
        std::fs::write(&path, text)?;
        load(&path)
    }

    /// docs/math.md, Counting: ≈63M (base) and ≈214M (big) with a shared 37,000-token vocabulary.
    #[test]
    fn committed_paper_configs_have_the_paper_param_counts() {
        let (base, vocab) = committed("transformer-base.toml");
        assert_eq!(base, ModelConfig::base());
        assert_eq!(count(&base, vocab).params, 63_082_496);
        let (big, vocab) = committed("transformer-big.toml");
        assert_eq!(big, ModelConfig::big());
        assert_eq!(count(&big, vocab).params, 214_245_376);
    }

    #[test]
    fn a_file_names_only_what_it_changes() {
        let (config, vocab) = resolve("[data]\nvocab_size = 65\n[model]\nd_model = 96\n").unwrap();
        let defaults = resolve("[data]\nvocab_size = 65\n").unwrap().0;
        assert_eq!(config, ModelConfig { d_model: 96, ..defaults });
        assert_eq!(vocab, 65);
    }

    #[test]
    fn errors_name_the_key() {
        let err = |text: &str| format!("{:#}", resolve(text).unwrap_err());
        assert!(err("[data]\nvocab_size = 9\n[model]\nflux_capacitor = 1").contains("unknown key model.flux_capacitor"));
        assert!(err("[data]\nvocab_size = 9\n[model]\nd_model = \"wide\"").contains("model.d_model"));
        assert!(err("[data]\nvocab_size = 9\n[model]\nd_model = 100\nn_heads = 3")
            .contains("model.n_heads = 3 must divide model.d_model = 100"));
        assert!(err("[model]\nd_model = 64").contains("data.vocab_size"));
    }

    /// `params` reads a file as `train` does: a file `train` refuses is refused here too.
    #[test]
    fn every_section_is_checked_as_train_checks_it() {
        let err = |text: &str| format!("{:#}", resolve(text).unwrap_err());
        assert!(err("[data]\nvocab_size = 9\n[train]\nlr = \"x\"").contains("train.lr"));
        assert!(err("[data]\nvocab_size = 9\n[elsewhere]\nk = 1").contains("unknown section [elsewhere]"));
    }
}
