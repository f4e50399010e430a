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
//!
//! Compiled kernels are kept per build, in `compiled/BUILD` under the directory (`BUILD`: a
//! hash of the running executable's bytes). CubeCL finds a compiled kernel by its name and
//! compile-time arguments alone, not by its source (cubecl-runtime 0.10's
//! `KernelId::stable_hash`), so a build whose kernel changed under the same name would run
//! the kernel an earlier build compiled. Autotune results stay shared: a stale choice costs
//! speed, never a wrong result. Other builds' directories are left alone (two builds may run
//! side by side); delete `compiled/` to reclaim them.

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
    /// Ours: one directory (autotune results), this build's compiled kernels under it, and
    /// how many files of both it held before this run (0: a cold start).
    Directory { dir: PathBuf, compiled: PathBuf, files_before: usize },
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
    let exe = std::env::current_exe().context("finding the running executable (it keys the compiled-kernel cache)")?;
    let plan = plan(&cwd, &exe, env("ATTEND_CACHE_DIR"), env("XDG_CACHE_HOME"), env("HOME"))?;
    if let KernelCache::Directory { dir, compiled, .. } = &plan {
        // `compiled` lies under `dir`: creating it creates both.
        std::fs::create_dir_all(compiled)
            .with_context(|| format!("creating the kernel cache {}", compiled.display()))?;
        set_cubecl_caches(dir, compiled);
    }
    Ok(CONFIGURED.get_or_init(|| plan))
}

/// Decides where the caches go, from the working directory, the running executable `exe` and
/// the environment.
fn plan(
    cwd: &Path,
    exe: &Path,
    ours: Option<PathBuf>,
    xdg: Option<PathBuf>,
    home: Option<PathBuf>,
) -> Result<KernelCache> {
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
    let compiled = dir.join(COMPILED).join(build_key(exe)?);
    // Other builds' compiled kernels are no use to this one.
    let files_before = count_files(&dir) - count_files(&dir.join(COMPILED)) + count_files(&compiled);
    Ok(KernelCache::Directory { dir, compiled, files_before })
}

/// The cache's subdirectory of compiled kernels, one directory per build under it.
const COMPILED: &str = "compiled";

/// A build's key: 16 hex digits of a hash of the executable's bytes, so that a rebuilt
/// kernel never meets the compiled form of the kernel it replaced.
fn build_key(exe: &Path) -> Result<String> {
    use std::hash::Hasher;
    use std::io::Read;
    let what = || format!("reading {} (its bytes key the compiled-kernel cache)", exe.display());
    let mut file = std::fs::File::open(exe).with_context(what)?;
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = file.read(&mut buf).with_context(what)?;
        if n == 0 {
            break;
        }
        hasher.write(&buf[..n]);
    }
    Ok(format!("{:016x}", hasher.finish()))
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
fn set_cubecl_caches(dir: &Path, compiled: &Path) {
    use cubecl_runtime::config::cache::CacheConfig;
    use cubecl_runtime::config::{CubeClRuntimeConfig, RuntimeConfig};
    let mut config = CubeClRuntimeConfig::default().override_from_env();
    config.compilation.cache = Some(CacheConfig::File(compiled.to_path_buf()));
    config.autotune.cache = CacheConfig::File(dir.to_path_buf());
    // Only `configure` sets it, once, before any client reads it (`CONFIGURED` guards).
    CubeClRuntimeConfig::set(config);
}

#[cfg(not(any(feature = "wgpu", feature = "cuda")))]
fn set_cubecl_caches(_dir: &Path, _compiled: &Path) {}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stand-in for the running executable: a file of `bytes`.
    fn executable(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, bytes).unwrap();
        path
    }

    fn directory(plan: KernelCache) -> (PathBuf, PathBuf, usize) {
        match plan {
            KernelCache::Directory { dir, compiled, files_before } => (dir, compiled, files_before),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn cache_directory_is_attend_cache_dir_else_xdg_else_home() {
        let cwd = tempfile::tempdir().unwrap();
        let exe = executable(cwd.path(), "xtask", b"build");
        let (a, x, h) = (PathBuf::from("/a"), PathBuf::from("/x"), PathBuf::from("/h"));
        let at = |o: Option<&PathBuf>, x: Option<&PathBuf>, h: Option<&PathBuf>| {
            directory(plan(cwd.path(), &exe, o.cloned(), x.cloned(), h.cloned()).unwrap()).0
        };
        assert_eq!(at(Some(&a), Some(&x), Some(&h)), a);
        assert_eq!(at(None, Some(&x), Some(&h)), x.join("attend/cubecl"));
        assert_eq!(at(None, None, Some(&h)), h.join(".cache/attend/cubecl"));
        let err = plan(cwd.path(), &exe, None, None, None).unwrap_err().to_string();
        assert!(err.contains("ATTEND_CACHE_DIR"), "{err}");
    }

    #[test]
    fn a_cubecl_file_above_the_working_directory_is_left_in_charge() {
        let root = tempfile::tempdir().unwrap();
        let below = root.path().join("runs/deep");
        std::fs::create_dir_all(&below).unwrap();
        std::fs::write(root.path().join("burn.toml"), "[cubecl]\n").unwrap();
        let exe = executable(root.path(), "xtask", b"build");
        let plan = plan(&below, &exe, Some(PathBuf::from("/a")), None, None).unwrap();
        assert_eq!(plan, KernelCache::UserFile(root.path().join("burn.toml")));
    }

    #[test]
    fn each_build_compiles_into_its_own_directory_and_all_share_the_autotune_results() {
        let cache = tempfile::tempdir().unwrap();
        let bins = tempfile::tempdir().unwrap();
        let old = executable(bins.path(), "old", b"kernel as it was");
        let new = executable(bins.path(), "new", b"kernel as it is now");
        let copy = executable(bins.path(), "copy", b"kernel as it was");
        let at = |exe: &Path| directory(plan(cache.path(), exe, Some(cache.path().to_path_buf()), None, None).unwrap());
        let ((dir_old, old_kernels, _), (dir_new, new_kernels, _)) = (at(&old), at(&new));
        assert_eq!(dir_old, cache.path());
        assert_eq!(dir_new, cache.path());
        assert_ne!(old_kernels, new_kernels, "a rebuilt executable must not read the kernels an earlier one compiled");
        assert_eq!(old_kernels.parent(), Some(cache.path().join(COMPILED).as_path()));
        assert_eq!(new_kernels.parent(), old_kernels.parent());
        assert_eq!(at(&copy).1, old_kernels, "the same bytes are the same build");
        let missing = bins.path().join("gone");
        let err = plan(cache.path(), &missing, Some(cache.path().to_path_buf()), None, None).unwrap_err();
        assert!(format!("{err:#}").contains("gone"), "{err:#}");
    }

    #[test]
    fn files_already_cached_count_the_autotune_results_and_this_builds_kernels_only() {
        let cache = tempfile::tempdir().unwrap();
        let bins = tempfile::tempdir().unwrap();
        let (this, other) = (executable(bins.path(), "this", b"this"), executable(bins.path(), "other", b"other"));
        let at = |exe: &Path| directory(plan(cache.path(), exe, Some(cache.path().to_path_buf()), None, None).unwrap());
        assert_eq!(at(&this).2, 0);
        std::fs::create_dir_all(cache.path().join("autotune/0.10.0")).unwrap();
        std::fs::write(cache.path().join("autotune/0.10.0/matmul.json.log"), "{}").unwrap();
        for exe in [&this, &other] {
            let kernels = at(exe).1.join("vulkan/0.10.0");
            std::fs::create_dir_all(&kernels).unwrap();
            std::fs::write(kernels.join("spirv.bin"), "x").unwrap();
        }
        std::fs::write(at(&this).1.join("vulkan/0.10.0/spirv.lock"), "x").unwrap();
        assert_eq!(at(&this).2, 3, "one autotune file and this build's two");
        assert_eq!(at(&other).2, 2, "one autotune file and the other build's one");
    }
}
