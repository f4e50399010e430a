//! `bench products`: the linear maps' matrix products of nanoGPT's GPU configuration
//! (`attend_train::product_bench`) timed with CubeCL's kernel and with ours
//! (`ATTEND_GPU_MATMUL`), side by side in the same process on `--backend`'s device: one JSON
//! line per product and kernel (ms, TFLOP/s), and on stderr a line per product with ours over
//! CubeCL's time.

use anyhow::Result;
use attend_model::fused::GpuProducts;
use attend_train::product_bench::{time_linear_products, NANOGPT_GPU_MAPS};
use burn::tensor::backend::AutodiffBackend;
use serde_json::json;

use crate::backend::{run_on, Backend, OnBackend};
use crate::bench::args::BenchArgs;
use crate::bench::peers::emit;

/// Untimed products before each timing (CubeCL autotunes and compiles in them).
const WARMUP: usize = 3;

struct Products {
    rows: usize,
    reps: usize,
    backend: &'static str,
}

impl OnBackend for Products {
    type Output = ();
    fn run<B: AutodiffBackend>(self, device: &B::Device) -> Result<()> {
        let kernels = [GpuProducts::Burn, GpuProducts::Ours];
        let times =
            time_linear_products::<B::InnerBackend>(device, self.rows, &NANOGPT_GPU_MAPS, &kernels, WARMUP, self.reps)?;
        for pair in times.chunks(kernels.len()) {
            let (burn, ours) = (&pair[0], &pair[1]);
            for t in pair {
                emit(json!({"bench": "linear_product", "backend": self.backend, "map": [t.map.0, t.map.1],
                            "product": t.product.name(), "dims": t.dims,
                            "kernel": if t.kernel == GpuProducts::Ours { "attend" } else { "cubecl" },
                            "reps": self.reps, "ms": t.seconds * 1e3, "tflops": t.tflops()}));
            }
            eprintln!(
                "{:>4}→{:<4} {:<26} cubecl {:8.3} ms {:6.2} TFLOP/s | attend {:8.3} ms {:6.2} TFLOP/s | attend/cubecl time {:.2}",
                burn.map.0,
                burn.map.1,
                burn.product.name(),
                burn.seconds * 1e3,
                burn.tflops(),
                ours.seconds * 1e3,
                ours.tflops(),
                ours.seconds / burn.seconds
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
    let work = Products { rows: args.rows, reps: args.reps.max(1) * 10, backend: args.backend.name() };
    run_on(args.backend, work)
}
