//! `cargo xtask params --config FILE`: parameter count and forward FLOPs per token of the
//! configured model, from the configuration alone (nothing is allocated or trained).
//!
//! The file's `[model]` section is laid over `configs/default.toml`'s (DESIGN.md section 4:
//! a file names only what it changes) and checked strictly: an unknown key or a wrong type is
//! an error naming `model.KEY`. `[data] vocab_size` gives the vocabulary. Other sections
//! (`[train]`, `[decode]`, ...) are not read here.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use attend_model::{count, ModelConfig, ParamReport};
use clap::Args;

/// The built-in defaults every configuration file is laid over.
const DEFAULT_CONFIG: &str = include_str!("../../configs/default.toml");

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
    println!(
        "{{\"params\": {}, \"flops_per_token\": {}}}",
        report.params, report.flops_per_token
    );
    Ok(())
}

/// The model configuration and vocabulary size of the file at `path`.
fn load(path: &Path) -> Result<(ModelConfig, usize)> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    resolve(&text).with_context(|| format!("in {}", path.display()))
}

/// `[model]` and `[data] vocab_size` of a configuration text laid over the defaults.
fn resolve(text: &str) -> Result<(ModelConfig, usize)> {
    let defaults: toml::Table = DEFAULT_CONFIG
        .parse()
        .context("parsing the built-in configs/default.toml")?;
    let file: toml::Table = text.parse()?;
    let section = |table: &toml::Table, name: &str| -> Result<toml::Table> {
        match table.get(name) {
            None => Ok(toml::Table::new()),
            Some(toml::Value::Table(t)) => Ok(t.clone()),
            Some(other) => bail!("[{name}] must be a table, found {}", other.type_str()),
        }
    };

    let mut model = section(&defaults, "model")?;
    model.extend(section(&file, "model")?);
    let config = model_config(model)?;
    config.validate()?;

    let mut data = section(&defaults, "data")?;
    data.extend(section(&file, "data")?);
    let vocab_size = match data.get("vocab_size") {
        Some(toml::Value::Integer(n)) if *n > 0 => *n as usize,
        Some(toml::Value::Integer(0)) | None => bail!(
            "data.vocab_size = 0 means \"taken from the data\"; counting parameters needs a fixed vocabulary size"
        ),
        Some(other) => bail!("data.vocab_size = {other}: expected a positive integer"),
    };
    Ok((config, vocab_size))
}

/// Deserializes `[model]` strictly, naming the key at fault.
fn model_config(model: toml::Table) -> Result<ModelConfig> {
    let known = toml::Table::try_from(ModelConfig::base()).context("listing the model keys")?;
    for (key, value) in &model {
        if !known.contains_key(key) {
            bail!("unknown key model.{key}");
        }
        // Each key alone over the defaults: a failure is that key's.
        let single: toml::Table = [(key.clone(), value.clone())].into_iter().collect();
        if let Err(err) = single.try_into::<ModelConfig>() {
            bail!("model.{key} = {value}: {}", err.to_string().trim());
        }
    }
    Ok(model.try_into()?)
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
        load(
            &Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../configs")
                .join(name),
        )
        .unwrap()
    }

    /// DESIGN.md section 6: ≈63M (base) and ≈214M (big) with the shared 37,000-token vocabulary.
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
        assert_eq!(
            config,
            ModelConfig {
                d_model: 96,
                ..defaults
            }
        );
        assert_eq!(vocab, 65);
    }

    #[test]
    fn errors_name_the_key() {
        let err = |text: &str| format!("{:#}", resolve(text).unwrap_err());
        assert!(err("[data]\nvocab_size = 9\n[model]\nflux_capacitor = 1")
            .contains("unknown key model.flux_capacitor"));
        assert!(err("[data]\nvocab_size = 9\n[model]\nd_model = \"wide\"")
            .starts_with("model.d_model = \"wide\""));
        assert!(
            err("[data]\nvocab_size = 9\n[model]\nd_model = 100\nn_heads = 3")
                .contains("model.n_heads = 3 must divide model.d_model = 100")
        );
        assert!(err("[model]\nd_model = 64").contains("data.vocab_size"));
    }

    #[test]
    fn other_sections_are_not_read() {
        assert!(resolve(
            "[data]\nvocab_size = 9\nwhatever = 1\n[train]\nlr = \"x\"\n[elsewhere]\nk = 1"
        )
        .is_ok());
    }
}
