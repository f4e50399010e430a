//! `bench products`: the matrix products of nanoGPT's GPU configuration
//! (`attend_train::product_bench`: its linear maps', and attention's per head) timed with
//! CubeCL's kernel and with ours (`ATTEND_GPU_MATMUL`) under `auto` and every tile
//! (`ATTEND_GPU_TILE`),
//! side by side in the same process on `--backend`'s device: one JSON line per product and
//! kernel (ms, TFLOP/s), and on stderr a line per product with each kernel's time over
//! CubeCL's.

use anyhow::Result;
use attend_model::fused::{
    parse_product_addresses, parse_product_fma, parse_product_lanes, parse_product_stores, parse_product_tile,
    product_form, GpuProducts, ProductForm, ProductTile, TileChoice,
};
use attend_train::product_bench::{
    time_attention_products, time_linear_products, ProductKernel, NANOGPT_GPU_ATTENTION, NANOGPT_GPU_MAPS,
};
use burn::tensor::backend::AutodiffBackend;
use serde_json::json;

use crate::backend::{run_on, Backend, OnBackend};
use crate::bench::args::BenchArgs;
use crate::bench::peers::emit;

/// Untimed products before each timing (CubeCL autotunes and compiles in them); at least as
/// many as the timed ones (`product_bench::time`), whose memory they leave in the pool.
const WARMUP: usize = 3;

struct Products {
    kernels: Vec<ProductKernel>,
    rows: usize,
    reps: usize,
    backend: &'static str,
}

impl OnBackend for Products {
    type Output = ();
    fn run<B: AutodiffBackend>(self, device: &B::Device) -> Result<()> {
        let kernels = self.kernels;
        let mut times =
            time_linear_products::<B::InnerBackend>(device, self.rows, &NANOGPT_GPU_MAPS, &kernels, WARMUP, self.reps)?;
        let attention = NANOGPT_GPU_ATTENTION;
        times.extend(time_attention_products::<B::InnerBackend>(
            device, self.rows, attention, &kernels, WARMUP, self.reps,
        )?);
        eprintln!("ms per product; in brackets over CubeCL's time; kernels: {}", {
            let names: Vec<String> = kernels.iter().map(|k| k.name()).collect();
            names.join(", ")
        });
        for same in times.chunks(kernels.len()) {
            let cubecl = &same[0];
            for t in same {
                // Our kernel's form (null for CubeCL's, which has none).
                let ours = t.kernel.products == GpuProducts::Ours;
                let fma = ours.then_some(t.kernel.form.fma);
                let lanes = ours.then_some(if t.kernel.form.paired_lanes { "pairs" } else { "rows" });
                let addresses = ours.then_some(if t.kernel.form.constant_offsets { "offsets" } else { "sums" });
                let stores = ours.then_some(if t.kernel.form.inline_stores { "inline" } else { "apart" });
                emit(json!({"bench": "product", "backend": self.backend, "map": [t.map.0, t.map.1],
                            "product": t.product, "dims": t.dims, "matrices": t.matrices,
                            "kernel": t.kernel.name(), "fma": fma, "lanes": lanes, "addresses": addresses, "stores": stores,
                            "reps": self.reps, "ms": t.seconds * 1e3,
                            "tflops": t.tflops(), "over_cubecl": t.seconds / cubecl.seconds}));
            }
            let best = same.iter().min_by(|a, b| a.seconds.total_cmp(&b.seconds)).expect("a kernel");
            let each: Vec<String> = same[1..]
                .iter()
                .map(|t| format!("{:.3} ({:.2})", t.seconds * 1e3, t.seconds / cubecl.seconds))
                .collect();
            eprintln!(
                "{:>4},{:<4} {:<26} cubecl {:.3} | attend {} | best {} {:.2} TFLOP/s",
                cubecl.map.0,
                cubecl.map.1,
                cubecl.product,
                cubecl.seconds * 1e3,
                each.join(" "),
                best.kernel.name(),
                best.tflops()
            );
        }
        Ok(())
    }
}

pub fn bench_products(args: &BenchArgs) -> Result<()> {
    if args.backend == Backend::Ndarray {
        anyhow::bail!(
            "bench products compares the GPU backends' product kernels (CubeCL's and ours): give \
             --backend wgpu, wgpu-unfused or cuda (a build with --features wgpu or cuda)"
        );
    }
    let kernels = kernels(args)?;
    let work = Products { kernels, rows: args.rows, reps: args.reps * 10, backend: args.backend.name() };
    run_on(args.backend, work)
}

/// The kernels `--tiles`, `--lanes`, `--fma`, `--addresses` and `--stores` ask for: every tile in the environment's form
/// where none is given, else each tile named (or `auto` and every tile) in each form named.
fn kernels(args: &BenchArgs) -> Result<Vec<ProductKernel>> {
    if args.tiles.is_empty()
        && args.lanes.is_empty()
        && args.fma.is_empty()
        && args.addresses.is_empty()
        && args.stores.is_empty()
    {
        return Ok(ProductKernel::all());
    }
    // An empty item (`--tiles auto,`) would parse as the default and time it twice.
    let lists = [
        ("--tiles", &args.tiles),
        ("--lanes", &args.lanes),
        ("--fma", &args.fma),
        ("--addresses", &args.addresses),
        ("--stores", &args.stores),
    ];
    if let Some((name, _)) = lists.iter().find(|(_, items)| items.iter().any(|i| i.trim().is_empty())) {
        anyhow::bail!("{name} has an empty item: give its values separated by single commas");
    }
    let tiles = if args.tiles.is_empty() {
        std::iter::once(TileChoice::Auto).chain(ProductTile::ALL.into_iter().map(TileChoice::Fixed)).collect()
    } else {
        parsed(&args.tiles, "--tiles", "ATTEND_GPU_TILE", parse_product_tile)?
    };
    let env = product_form();
    let lanes = if args.lanes.is_empty() {
        vec![env.paired_lanes]
    } else {
        parsed(&args.lanes, "--lanes", "ATTEND_GPU_LANES", parse_product_lanes)?
    };
    let fma = if args.fma.is_empty() {
        vec![env.fma]
    } else {
        parsed(&args.fma, "--fma", "ATTEND_GPU_FMA", parse_product_fma)?
    };
    let addresses = if args.addresses.is_empty() {
        vec![env.constant_offsets]
    } else {
        parsed(&args.addresses, "--addresses", "ATTEND_GPU_ADDRESSES", parse_product_addresses)?
    };
    let stores = if args.stores.is_empty() {
        vec![env.inline_stores]
    } else {
        parsed(&args.stores, "--stores", "ATTEND_GPU_STORES", parse_product_stores)?
    };
    let mut forms = Vec::new();
    for &paired_lanes in &lanes {
        for &fma in &fma {
            for &constant_offsets in &addresses {
                for &inline_stores in &stores {
                    forms.push(ProductForm { fma, paired_lanes, constant_offsets, inline_stores });
                }
            }
        }
    }
    Ok(ProductKernel::with_tiles(&tiles, &forms))
}

/// `flag`'s values, each read as the environment variable `var` would be by `parse`.
fn parsed<T>(
    values: &[String],
    flag: &str,
    var: &str,
    parse: impl Fn(&str) -> std::result::Result<T, String>,
) -> Result<Vec<T>> {
    values.iter().map(|v| parse(v).map_err(|e| anyhow::anyhow!("{flag} takes {var}'s values: {e}"))).collect()
}
