//! Times the matrix products of a model's linear maps with each GPU product kernel
//! (`attend_model::fused::GpuProducts`: CubeCL's and ours), for `cargo xtask bench products`:
//! for each map `d_in → d_out` over `rows` positions, the forward `x·W`, the input gradient
//! `dy·Wᵀ`, the weight gradient `xᵀ·dy` in row slices (what training runs) and in one product.
//!
//! Each timing is `reps` products issued back to back after `warmup` untimed ones (which
//! autotune CubeCL's kernels and compile ours), between two synchronizations of the device;
//! the outputs are kept until the second, so that no product is skipped.

use std::time::Instant;

use attend_model::fused::{linear_product, GpuProducts, LinearProduct};
use burn::tensor::backend::Backend;
use burn::tensor::{Distribution, Tensor};

use crate::error::TrainError;

/// The time of one kind of product with one kernel.
#[derive(Clone, Debug)]
pub struct ProductTime {
    pub map: (usize, usize),
    pub product: LinearProduct,
    pub kernel: GpuProducts,
    /// `[m, k, n]`: `2·m·k·n` operations.
    pub dims: [usize; 3],
    /// Seconds per product.
    pub seconds: f64,
}

impl ProductTime {
    /// Operations per second (`2·m·k·n / seconds`), in TFLOP/s.
    pub fn tflops(&self) -> f64 {
        let [m, k, n] = self.dims;
        2.0 * (m * k * n) as f64 / self.seconds / 1e12
    }
}

/// The linear maps of nanoGPT's GPU configuration (`configs/lm-shakespeare-gpu.toml`, d_model
/// 384): self-attention's merged projections, its output, the MLP's two, and the tied
/// embedding as the output layer over 65 characters.
pub const NANOGPT_GPU_MAPS: [(usize, usize); 5] = [(384, 1152), (384, 384), (384, 1536), (1536, 384), (384, 65)];

/// Times every [`LinearProduct`] of every map in `maps` over `rows` positions, with each kernel
/// of `kernels` (on a backend without our kernel, `attend` runs Burn's product too).
pub fn time_linear_products<B: Backend>(
    device: &B::Device,
    rows: usize,
    maps: &[(usize, usize)],
    kernels: &[GpuProducts],
    warmup: usize,
    reps: usize,
) -> Result<Vec<ProductTime>, TrainError> {
    if rows == 0 || reps == 0 {
        return Err(TrainError::Usage(format!("bench products: rows ({rows}) and reps ({reps}) must be positive")));
    }
    let sync = || B::sync(device).map_err(|e| TrainError::Usage(format!("bench products: the device failed: {e:?}")));
    let mut times = Vec::new();
    for &(d_in, d_out) in maps {
        let normal = Distribution::Normal(0.0, 1.0);
        let x = Tensor::<B, 2>::random([rows, d_in], normal, device);
        let w = Tensor::<B, 2>::random([d_in, d_out], normal, device);
        let dy = Tensor::<B, 2>::random([rows, d_out], normal, device);
        for product in LinearProduct::ALL {
            for &kernel in kernels {
                let run = || linear_product(product, kernel, x.clone(), w.clone(), dy.clone());
                let warm: Vec<_> = (0..warmup).map(|_| run()).collect();
                sync()?;
                drop(warm);
                let start = Instant::now();
                let outputs: Vec<_> = (0..reps).map(|_| run()).collect();
                sync()?;
                let seconds = start.elapsed().as_secs_f64() / reps as f64;
                drop(outputs);
                let dims = product.dims(rows, d_in, d_out);
                times.push(ProductTime { map: (d_in, d_out), product, kernel, dims, seconds });
            }
        }
    }
    Ok(times)
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn_ndarray::NdArray;

    #[test]
    fn product_times_cover_every_map_product_and_kernel_with_their_dimensions() {
        let kernels = [GpuProducts::Burn, GpuProducts::Ours];
        let times =
            time_linear_products::<NdArray<f32>>(&Default::default(), 64, &[(8, 24), (24, 8)], &kernels, 1, 2).unwrap();
        assert_eq!(times.len(), 2 * LinearProduct::ALL.len() * kernels.len());
        let forward = times.iter().find(|t| t.map == (8, 24) && t.product == LinearProduct::Forward).unwrap();
        assert_eq!(forward.dims, [64, 8, 24]);
        let dw = times.iter().find(|t| t.map == (24, 8) && t.product == LinearProduct::WeightGradient).unwrap();
        assert_eq!(dw.dims, [24, 64, 8]);
        assert!(times.iter().all(|t| t.seconds > 0.0 && t.tflops().is_finite()));
    }

    #[test]
    fn no_rows_or_no_repetitions_is_an_error_that_names_them() {
        let none = time_linear_products::<NdArray<f32>>(&Default::default(), 0, &[(8, 8)], &[GpuProducts::Burn], 0, 1);
        assert!(none.unwrap_err().to_string().contains("rows (0)"));
    }
}
