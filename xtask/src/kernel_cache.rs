//! Where the GPU backends keep the kernels they compile and the choices they tune, so that the
//! second run on a machine starts in seconds instead of minutes.
//!
//! CubeCL (under burn-wgpu and burn-cuda) compiles each kernel on first use and autotunes
//! matrix products and reductions by timing candidate kernels on the device. Left to itself,
//! its compilation cache is off, and its autotune cache lives in the `target/` directory of the
//! nearest Cargo project above the working directory (else `~/.cache/cubecl`): the same model
//! run from another directory starts cold again. [`configure`] points both at one directory
//! per user: `$ATTEND_CACHE_DIR`, else `$XDG_CACHE_HOME/attend/cubecl`, else
//! `~/.cache/attend/cubecl`; unless a CubeCL configuration file (`cubecl.toml`, `CubeCL.toml`,
//! or a `[cubecl]` section of `burn.toml`/`Burn.toml`) above the working directory says what
//! CubeCL should do, which is then left to it. CubeCL's own environment variables
//! (`CUBECL_DEBUG_LOG`, `CUBECL_AUTOTUNE_LEVEL`, …) still apply.
//!
//! What persists: autotune results on every GPU backend; compiled kernels where CubeCL can
//! cache them (CUDA binaries; SPIR-V when burn-wgpu compiles to SPIR-V). burn-wgpu's default
//! WGSL path hands its shaders to the driver, whose own pipeline cache applies (NVIDIA's
//! driver keeps one on disk; Mesa's lavapipe does not).

#![cfg_attr(not(any(feature = "wgpu", feature = "cuda")), allow(dead_code))]

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use anyhow::{Context, Result};

/// The configuration files CubeCL reads itself (`RuntimeConfig::file_names` and
/// `section_file_names` of cubecl-runtime 0.10's `CubeClRuntimeConfig`).
const CUBECL_FILES: [&str; 4] = ["cubecl.toml", "CubeCL.toml", "burn.toml", "Burn.toml"];

/// Where this process's kernel caches are, once [`configure`] has run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KernelCache {
    /// Ours: one directory, and how many files it held before this run (0: a cold start).
    Directory { dir: PathBuf, files_before: usize },
    /// A CubeCL configuration file decides.
    UserFile(PathBuf),
}

static CONFIGURED: OnceLock<KernelCache> = OnceLock::new();

/// The kernel caches of this process, if a GPU backend has been set up.
pub fn configured() -> Option<&'static KernelCache> {
    CONFIGURED.get()
}

/// Sets CubeCL's caches (see the module doc) before the first GPU client exists; later calls
/// return the first answer.
pub fn configure() -> Result<&'static KernelCache> {
    if let Some(done) = CONFIGURED.get() {
        return Ok(done);
    }
    let cwd = std::env::current_dir().context("reading the working directory")?;
    let env = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty()).map(PathBuf::from);
    let plan = plan(&cwd, env("ATTEND_CACHE_DIR"), env("XDG_CACHE_HOME"), env("HOME"))?;
    if let KernelCache::Directory { dir, .. } = &plan {
        std::fs::create_dir_all(dir).with_context(|| format!("creating the kernel cache {}", dir.display()))?;
        set_cubecl_caches(dir);
    }
    Ok(CONFIGURED.get_or_init(|| plan))
}

/// Decides where the caches go, from the working directory and the environment.
fn plan(cwd: &Path, ours: Option<PathBuf>, xdg: Option<PathBuf>, home: Option<PathBuf>) -> Result<KernelCache> {
    if let Some(file) = cwd.ancestors().flat_map(|d| CUBECL_FILES.map(|f| d.join(f))).find(|p| p.is_file()) {
        return Ok(KernelCache::UserFile(file));
    }
    let dir = match (ours, xdg, home) {
        (Some(dir), _, _) => dir,
        (None, Some(xdg), _) => xdg.join("attend").join("cubecl"),
        (None, None, Some(home)) => home.join(".cache").join("attend").join("cubecl"),
        (None, None, None) => {
            anyhow::bail!("no directory for the GPU kernel cache: set ATTEND_CACHE_DIR (or XDG_CACHE_HOME or HOME)")
        }
    };
    let files_before = count_files(&dir);
    Ok(KernelCache::Directory { dir, files_before })
}

fn count_files(dir: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else { return 0 };
    entries
        .flatten()
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => count_files(&e.path()),
            Ok(t) if t.is_file() => 1,
            _ => 0,
        })
        .sum()
}

#[cfg(any(feature = "wgpu", feature = "cuda"))]
fn set_cubecl_caches(dir: &Path) {
    use cubecl_runtime::config::cache::CacheConfig;
    use cubecl_runtime::config::{CubeClRuntimeConfig, RuntimeConfig};
    let mut config = CubeClRuntimeConfig::default().override_from_env();
    config.compilation.cache = Some(CacheConfig::File(dir.to_path_buf()));
    config.autotune.cache = CacheConfig::File(dir.to_path_buf());
    // Only `configure` sets it, once, before any client reads it (`CONFIGURED` guards).
    CubeClRuntimeConfig::set(config);
}

#[cfg(not(any(feature = "wgpu", feature = "cuda")))]
fn set_cubecl_caches(_dir: &Path) {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_directory_is_attend_cache_dir_else_xdg_else_home() {
        let cwd = tempfile::tempdir().unwrap();
        let (a, x, h) = (PathBuf::from("/a"), PathBuf::from("/x"), PathBuf::from("/h"));
        let dir = |p: KernelCache| match p {
            KernelCache::Directory { dir, .. } => dir,
            other => panic!("{other:?}"),
        };
        let at = |o: Option<&PathBuf>, x: Option<&PathBuf>, h: Option<&PathBuf>| {
            dir(plan(cwd.path(), o.cloned(), x.cloned(), h.cloned()).unwrap())
        };
        assert_eq!(at(Some(&a), Some(&x), Some(&h)), a);
        assert_eq!(at(None, Some(&x), Some(&h)), x.join("attend/cubecl"));
        assert_eq!(at(None, None, Some(&h)), h.join(".cache/attend/cubecl"));
        let err = plan(cwd.path(), None, None, None).unwrap_err().to_string();
        assert!(err.contains("ATTEND_CACHE_DIR"), "{err}");
    }

    #[test]
    fn a_cubecl_file_above_the_working_directory_is_left_in_charge() {
        let root = tempfile::tempdir().unwrap();
        let below = root.path().join("runs/deep");
        std::fs::create_dir_all(&below).unwrap();
        std::fs::write(root.path().join("burn.toml"), "[cubecl]\n").unwrap();
        let plan = plan(&below, Some(PathBuf::from("/a")), None, None).unwrap();
        assert_eq!(plan, KernelCache::UserFile(root.path().join("burn.toml")));
    }

    #[test]
    fn files_already_cached_are_counted_in_every_subdirectory() {
        let cache = tempfile::tempdir().unwrap();
        let before = |d: &Path| match plan(d, Some(d.to_path_buf()), None, None).unwrap() {
            KernelCache::Directory { files_before, .. } => files_before,
            other => panic!("{other:?}"),
        };
        assert_eq!(before(cache.path()), 0);
        std::fs::create_dir_all(cache.path().join("autotune/0.10.0")).unwrap();
        std::fs::write(cache.path().join("autotune/0.10.0/matmul.json.log"), "{}").unwrap();
        std::fs::write(cache.path().join("spirv.bin"), "x").unwrap();
        assert_eq!(before(cache.path()), 2);
    }
}
