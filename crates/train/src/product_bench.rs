//! Times the matrix products of a model's linear maps and of its attention with each GPU
//! product kernel (`attend_model::fused::GpuProducts`: CubeCL's, and ours under each tile
//! `ATTEND_GPU_TILE` takes), for `cargo xtask bench products`: for each map `d_in → d_out`
//! over `rows` positions, the forward `x·W`, the input gradient `dy·Wᵀ`, the weight gradient
//! `xᵀ·dy` in row slices (what training runs) and in one product; for attention over the
//! same positions in sequences of `len`, the six per-head products of its forward and backward,
//! full and under a causal mask as training runs them (`attend_model::fused::ProductShape`:
//! the masked half left out, results heads last; with CubeCL's kernel the full product and
//! the masks instead).
//!
//! Each timing is `reps` products issued back to back after `warmup` untimed ones (which
//! autotune CubeCL's kernels and compile ours), between two synchronizations of the device;
//! the outputs are kept until the second, so that no product is skipped. The untimed products
//! are at least `reps` and their outputs are kept together too, so that the device's memory
//! pool already holds a buffer for each timed output: the timing is the products', not the
//! allocation of new memory (which training, reusing its buffers step after step, does not pay).

use std::time::Instant;

use attend_model::fused::{
    linear_product, matmul, product_form, product_shaped, with_gpu_products, with_product_form, with_product_tile,
    GpuProducts, LinearProduct, ProductForm, ProductShape, ProductTile, TileChoice, Triangle,
};
use burn::tensor::backend::Backend;
use burn::tensor::{Distribution, Tensor};

use crate::error::TrainError;

/// A kernel to time: CubeCL's, or ours with a choice of tile and a form of its inner loop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProductKernel {
    pub products: GpuProducts,
    /// Our kernel's tiles (CubeCL's ignores them).
    pub tile: TileChoice,
    /// Our kernel's inner loop (CubeCL's ignores it).
    pub form: ProductForm,
}

impl ProductKernel {
    /// CubeCL's products.
    pub const CUBECL: ProductKernel =
        ProductKernel { products: GpuProducts::Burn, tile: TileChoice::Auto, form: ProductForm::DEFAULT };

    /// CubeCL's, then ours under `auto` and under every tile, in the environment's form.
    pub fn all() -> Vec<ProductKernel> {
        let fixed = ProductTile::ALL.into_iter().map(TileChoice::Fixed);
        Self::with_tiles(&std::iter::once(TileChoice::Auto).chain(fixed).collect::<Vec<_>>(), &[product_form()])
    }

    /// CubeCL's (every ratio's reference), then ours under each of `tiles` in turn, each tile
    /// in each of `forms`.
    pub fn with_tiles(tiles: &[TileChoice], forms: &[ProductForm]) -> Vec<ProductKernel> {
        let ours = tiles
            .iter()
            .flat_map(|&tile| forms.iter().map(move |&form| ProductKernel { products: GpuProducts::Ours, tile, form }));
        std::iter::once(Self::CUBECL).chain(ours).collect()
    }

    /// `cubecl`, or `attend` and the tile (`attend auto`, `attend 128x128x8`), and the form
    /// where it is not the default (`attend 64x128x8 lanes rows fma off addresses sums stores apart`).
    pub fn name(&self) -> String {
        match self.products {
            GpuProducts::Ours => {
                let lanes = if self.form.paired_lanes { "" } else { " lanes rows" };
                let fma = if self.form.fma { "" } else { " fma off" };
                let addresses = if self.form.constant_offsets { "" } else { " addresses sums" };
                let stores = if self.form.inline_stores { "" } else { " stores apart" };
                format!("attend {}{lanes}{fma}{addresses}{stores}", self.tile.name())
            }
            _ => "cubecl".to_string(),
        }
    }

    fn run<T>(&self, work: impl FnOnce() -> T) -> T {
        with_gpu_products(self.products, || with_product_tile(self.tile, || with_product_form(self.form, work)))
    }
}

/// The time of one product with one kernel.
#[derive(Clone, Debug)]
pub struct ProductTime {
    /// The linear map `d_in → d_out`, or attention's `[len, head width]`.
    pub map: (usize, usize),
    /// What the product is, e.g. `forward x·W`.
    pub product: &'static str,
    pub kernel: ProductKernel,
    /// `[m, k, n]`: `2·m·k·n` operations per matrix.
    pub dims: [usize; 3],
    /// Matrices in the product (attention's batch × heads; 1 for a linear map's).
    pub matrices: usize,
    /// Seconds per product.
    pub seconds: f64,
}

impl ProductTime {
    /// Operations per second (`2·m·k·n·matrices / seconds`), in TFLOP/s.
    pub fn tflops(&self) -> f64 {
        let [m, k, n] = self.dims;
        2.0 * (m * k * n * self.matrices) as f64 / self.seconds / 1e12
    }
}

/// The linear maps of nanoGPT's GPU configuration (`configs/lm-shakespeare-gpu.toml`, d_model
/// 384): self-attention's merged projections, its output, the MLP's two, and the tied
/// embedding as the output layer over 65 characters.
pub const NANOGPT_GPU_MAPS: [(usize, usize); 5] = [(384, 1152), (384, 384), (384, 1536), (1536, 384), (384, 65)];

/// nanoGPT's GPU configuration's attention: sequences of 256, 6 heads of width 64.
pub const NANOGPT_GPU_ATTENTION: AttentionShape = AttentionShape { len: 256, heads: 6, width: 64 };

/// The per-head products of attention over sequences of `len`, `heads` heads of `width`.
#[derive(Clone, Copy, Debug)]
pub struct AttentionShape {
    pub len: usize,
    pub heads: usize,
    pub width: usize,
}

/// Times `reps` runs of `run` after `max(warmup, reps)` untimed ones held together (so that
/// the timed outputs reuse their memory), between synchronizations of the device.
fn time<B: Backend, T>(device: &B::Device, warmup: usize, reps: usize, run: impl Fn() -> T) -> Result<f64, TrainError> {
    let sync = || B::sync(device).map_err(|e| TrainError::Usage(format!("bench products: the device failed: {e:?}")));
    let warm: Vec<_> = (0..warmup.max(reps)).map(|_| run()).collect();
    sync()?;
    drop(warm);
    let start = Instant::now();
    let outputs: Vec<_> = (0..reps).map(|_| run()).collect();
    sync()?;
    let seconds = start.elapsed().as_secs_f64() / reps as f64;
    drop(outputs);
    Ok(seconds)
}

fn check_sizes(rows: usize, reps: usize) -> Result<(), TrainError> {
    if rows == 0 || reps == 0 {
        return Err(TrainError::Usage(format!("bench products: rows ({rows}) and reps ({reps}) must be positive")));
    }
    Ok(())
}

/// Times every [`LinearProduct`] of every map in `maps` over `rows` positions, with each kernel
/// of `kernels` (on a backend without our kernel, `attend` runs Burn's product too).
pub fn time_linear_products<B: Backend>(
    device: &B::Device,
    rows: usize,
    maps: &[(usize, usize)],
    kernels: &[ProductKernel],
    warmup: usize,
    reps: usize,
) -> Result<Vec<ProductTime>, TrainError> {
    check_sizes(rows, reps)?;
    let mut times = Vec::new();
    for &(d_in, d_out) in maps {
        let normal = Distribution::Normal(0.0, 1.0);
        let x = Tensor::<B, 2>::random([rows, d_in], normal, device);
        let w = Tensor::<B, 2>::random([d_in, d_out], normal, device);
        let dy = Tensor::<B, 2>::random([rows, d_out], normal, device);
        for product in LinearProduct::ALL {
            for &kernel in kernels {
                let run = || kernel.run(|| linear_product(product, kernel.products, x.clone(), w.clone(), dy.clone()));
                let seconds = time::<B, _>(device, warmup, reps, run)?;
                let dims = product.dims(rows, d_in, d_out);
                times.push(ProductTime {
                    map: (d_in, d_out),
                    product: product.name(),
                    kernel,
                    dims,
                    matrices: 1,
                    seconds,
                });
            }
        }
    }
    Ok(times)
}

/// Times attention's six per-head products over `rows` positions (`rows / len` sequences)
/// with each kernel of `kernels`, as composed attention runs them (transposes as views): the
/// forward's scores `Q·Kᵀ` and context `P·V`, the backward's `dP = dC·Vᵀ`, `dV = Pᵀ·dC`,
/// `dQ = dS·K` and `dK = dSᵀ·Q`; then the same six under a causal mask.
pub fn time_attention_products<B: Backend>(
    device: &B::Device,
    rows: usize,
    shape: AttentionShape,
    kernels: &[ProductKernel],
    warmup: usize,
    reps: usize,
) -> Result<Vec<ProductTime>, TrainError> {
    check_sizes(rows, reps)?;
    let AttentionShape { len, heads, width } = shape;
    let batch = rows / len;
    if batch == 0 {
        return Err(TrainError::Usage(format!("bench products: rows ({rows}) hold no sequence of {len}")));
    }
    let normal = Distribution::Normal(0.0, 1.0);
    let narrow = || Tensor::<B, 4>::random([batch, heads, len, width], normal, device);
    let square = || Tensor::<B, 4>::random([batch, heads, len, len], normal, device);
    let (q, k, v, dc) = (narrow(), narrow(), narrow(), narrow());
    let (p, ds) = (square(), square());
    type Product<B> = fn(&[Tensor<B, 4>; 6]) -> Tensor<B, 4>;
    // Under a causal mask (offset 0) as training runs them: triangles, results heads last
    // where the heads are joined next (`attend_model::fused::ProductShape`).
    fn causal<B: Backend>(a: &Tensor<B, 4>, b: &Tensor<B, 4>, triangle: Triangle, heads_last: bool) -> Tensor<B, 4> {
        product_shaped(a.clone(), b.clone(), ProductShape::new(triangle, heads_last))
    }
    let products: [(&str, [usize; 3], Product<B>); 12] = [
        ("scores Q·Kᵀ", [len, width, len], |[q, k, ..]| matmul(q.clone(), k.clone().swap_dims(2, 3))),
        ("context P·V", [len, len, width], |[_, _, v, _, p, _]| matmul(p.clone(), v.clone())),
        ("dP = dC·Vᵀ", [len, width, len], |[_, _, v, dc, ..]| matmul(dc.clone(), v.clone().swap_dims(2, 3))),
        ("dV = Pᵀ·dC", [len, len, width], |[_, _, _, dc, p, _]| matmul(p.clone().swap_dims(2, 3), dc.clone())),
        ("dQ = dS·K", [len, len, width], |[_, k, _, _, _, ds]| matmul(ds.clone(), k.clone())),
        ("dK = dSᵀ·Q", [len, len, width], |[q, _, _, _, _, ds]| matmul(ds.clone().swap_dims(2, 3), q.clone())),
        ("scores Q·Kᵀ, causal", [len, width, len], |[q, k, ..]| {
            causal(q, &k.clone().swap_dims(2, 3), Triangle::Output(0), false)
        }),
        ("context P·V, causal", [len, len, width], |[_, _, v, _, p, _]| causal(p, v, Triangle::LowerA(0), true)),
        ("dP = dC·Vᵀ, causal", [len, width, len], |[_, _, v, dc, ..]| {
            causal(dc, &v.clone().swap_dims(2, 3), Triangle::Output(0), false)
        }),
        ("dV = Pᵀ·dC, causal", [len, len, width], |[_, _, _, dc, p, _]| {
            causal(&p.clone().swap_dims(2, 3), dc, Triangle::UpperA(0), true)
        }),
        ("dQ = dS·K, causal", [len, len, width], |[_, k, _, _, _, ds]| causal(ds, k, Triangle::LowerA(0), true)),
        ("dK = dSᵀ·Q, causal", [len, len, width], |[q, _, _, _, _, ds]| {
            causal(&ds.clone().swap_dims(2, 3), q, Triangle::UpperA(0), true)
        }),
    ];
    let operands = [q, k, v, dc, p, ds];
    let mut times = Vec::new();
    for (name, dims, product) in products {
        for &kernel in kernels {
            let seconds = time::<B, _>(device, warmup, reps, || kernel.run(|| product(&operands)))?;
            times.push(ProductTime {
                map: (len, width),
                product: name,
                kernel,
                dims,
                matrices: batch * heads,
                seconds,
            });
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
        let kernels = ProductKernel::all();
        let times =
            time_linear_products::<NdArray<f32>>(&Default::default(), 64, &[(8, 24), (24, 8)], &kernels, 1, 2).unwrap();
        assert_eq!(times.len(), 2 * LinearProduct::ALL.len() * kernels.len());
        let forward = times.iter().find(|t| t.map == (8, 24) && t.product == LinearProduct::Forward.name()).unwrap();
        assert_eq!(forward.dims, [64, 8, 24]);
        let dw = times.iter().find(|t| t.map == (24, 8) && t.product == LinearProduct::WeightGradient.name()).unwrap();
        assert_eq!(dw.dims, [24, 64, 8]);
        assert!(times.iter().all(|t| t.seconds > 0.0 && t.tflops().is_finite()));
        let names: Vec<String> = times[..kernels.len()].iter().map(|t| t.kernel.name()).collect();
        assert_eq!(names[..4], ["cubecl", "attend auto", "attend 128x128x8", "attend 128x128x16"]);
        assert_eq!(kernels.len(), 2 + ProductTile::ALL.len());
    }

    #[test]
    fn chosen_tiles_and_forms_follow_cubecls_kernel_in_the_order_given() {
        let wide = TileChoice::Fixed(ProductTile::of(64, 128, 8).wide());
        let old = ProductForm { fma: false, paired_lanes: false, constant_offsets: false, inline_stores: false };
        let kernels = ProductKernel::with_tiles(&[wide, TileChoice::Auto], &[ProductForm::DEFAULT, old]);
        let names: Vec<String> = kernels.iter().map(|k| k.name()).collect();
        assert_eq!(
            names,
            [
                "cubecl",
                "attend 64x128x8w",
                "attend 64x128x8w lanes rows fma off addresses sums stores apart",
                "attend auto",
                "attend auto lanes rows fma off addresses sums stores apart"
            ]
        );
        assert_eq!(kernels[2].form, old);
    }

    #[test]
    fn attention_times_cover_six_products_of_every_head_full_and_causal_with_their_dimensions() {
        let shape = AttentionShape { len: 8, heads: 2, width: 4 };
        let kernels = [ProductKernel::CUBECL];
        let times = time_attention_products::<NdArray<f32>>(&Default::default(), 24, shape, &kernels, 0, 1).unwrap();
        assert_eq!(times.len(), 12);
        assert_eq!(times[6].product, "scores Q·Kᵀ, causal");
        assert_eq!(times[6].dims, times[0].dims);
        assert!(times.iter().all(|t| t.matrices == 3 * 2 && t.seconds > 0.0));
        assert_eq!(times[0].dims, [8, 4, 8]);
        assert_eq!(times[1].dims, [8, 8, 4]);
        let short = time_attention_products::<NdArray<f32>>(&Default::default(), 7, shape, &kernels, 0, 1);
        assert!(short.unwrap_err().to_string().contains("no sequence of 8"));
    }

    /// `scripts/torch_products.py` (the peer `scripts/products_vs_torch.py` sets beside these
    /// times, matched by name) lists the same maps, attention's shape and products' names.
    #[test]
    fn pytorch_peer_script_times_the_same_maps_shapes_and_product_names() {
        let script = include_str!("../../../scripts/torch_products.py");
        let maps: Vec<String> = NANOGPT_GPU_MAPS.iter().map(|(d_in, d_out)| format!("({d_in}, {d_out})")).collect();
        assert!(script.contains(&format!("MAPS = [{}]", maps.join(", "))), "the script's MAPS differ");
        let AttentionShape { len, heads, width } = NANOGPT_GPU_ATTENTION;
        assert!(script.contains(&format!("LEN, HEADS, WIDTH = {len}, {heads}, {width}")), "the script's shape differs");
        let shape = AttentionShape { len: 4, heads: 1, width: 2 };
        let attention =
            time_attention_products::<NdArray<f32>>(&Default::default(), 4, shape, &[ProductKernel::CUBECL], 0, 1)
                .unwrap();
        let linear = LinearProduct::ALL.map(|p| p.name());
        // The full products (the first six); the causal ones are matched to them by name.
        for name in linear.iter().chain(attention[..6].iter().map(|t| &t.product)) {
            assert!(script.contains(&format!("(\"{name}\", [")), "the script has no product named {name:?}");
        }
        assert!(attention[6..].iter().all(|t| t.product.ends_with(", causal")));
    }

    #[test]
    fn no_rows_or_no_repetitions_is_an_error_that_names_them() {
        let none =
            time_linear_products::<NdArray<f32>>(&Default::default(), 0, &[(8, 8)], &[ProductKernel::CUBECL], 0, 1);
        assert!(none.unwrap_err().to_string().contains("rows (0)"));
        let never =
            time_linear_products::<NdArray<f32>>(&Default::default(), 8, &[(8, 8)], &[ProductKernel::CUBECL], 0, 0);
        assert!(never.unwrap_err().to_string().contains("reps (0)"));
    }
}
