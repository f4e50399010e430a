//! A linear map over rows, `y = x·W + b`, as one operation whose backward needs no transposed
//! copies: `dx = dy·Wᵀ`, `dW = xᵀ·dy`, `db = Σ_rows dy` (with `W` stored `[d_out, d_in]`, as a
//! tied embedding is: `y = x·Wᵀ + b`, `dx = dy·W`, `dW = dyᵀ·x`).
//!
//! On burn-ndarray the products run in the `gemm` crate, which reads a transposed operand
//! through its strides (burn-ndarray copies a non-contiguous operand into a new array first:
//! 9% of a training step went to those copies) and has AVX-512 kernels, chosen at run time
//! where the CPU has them; each output element is summed by one thread in a fixed order, so
//! results do not depend on the scheduling. The composed form's products elsewhere are
//! [`products::product`]: Burn's `matmul`, or on the GPU backends our kernel where `ATTEND_GPU_MATMUL` asks.

use core::mem::MaybeUninit;

use burn::tensor::backend::Backend;
use burn::tensor::ops::FloatTensor;
use burn::tensor::{Tensor, TensorData, TensorMetadata, TensorPrimitive};
use burn_ndarray::{NdArray, NdArrayTensor};

use super::products::{self, rows_product};
use super::unwritten::{assume_init, assume_init_mut, uninit};

/// How the weight is stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Weight {
    /// `[d_in, d_out]` (Burn's `Linear`): `y = x·W`.
    InOut,
    /// `[d_out, d_in]` (an embedding used as the output layer): `y = x·Wᵀ`.
    OutIn,
}

/// `x·W (+ b)`, composed of Burn's operations.
pub(super) fn composed<B: Backend>(
    x: Tensor<B, 2>,
    w: Tensor<B, 2>,
    b: Option<Tensor<B, 1>>,
    layout: Weight,
) -> Tensor<B, 2> {
    let w = if layout == Weight::OutIn { w.transpose() } else { w };
    let y = products::product(x, w);
    match b {
        Some(b) => y + b.unsqueeze_dim(0),
        None => y,
    }
}

/// `(dx, dW, db)`, composed (`db` as `[1, d_out]`, only `with_bias`).
pub(super) fn composed_backward<B: Backend>(
    x: Tensor<B, 2>,
    w: Tensor<B, 2>,
    grad: Tensor<B, 2>,
    layout: Weight,
    with_bias: bool,
) -> (Tensor<B, 2>, Tensor<B, 2>, Option<Tensor<B, 2>>) {
    let db = with_bias.then(|| {
        let sums = super::column_sums::column_sums::<B>(grad.clone().into_primitive().tensor());
        Tensor::<B, 1>::from_primitive(TensorPrimitive::Float(sums)).unsqueeze_dim(0)
    });
    match layout {
        Weight::InOut => (products::product(grad.clone(), w.transpose()), rows_product(x, grad), db),
        Weight::OutIn => (products::product(grad.clone(), w), rows_product(grad, x), db),
    }
}

type F = FloatTensor<NdArray<f32>>;

/// A row-major matrix or its transpose, as `gemm` reads it: `(pointer, column stride, row stride)`.
pub(super) fn view(values: &[f32], cols: usize, transposed: bool) -> (*const f32, isize, isize) {
    if transposed {
        (values.as_ptr(), cols as isize, 1)
    } else {
        (values.as_ptr(), 1, cols as isize)
    }
}

/// `dst[m, n] = lhs[m, k] · rhs[k, n]` (+ `dst` if `accumulate`), operands given by [`view`],
/// split over rayon's threads when it is large enough to pay for them.
fn product(
    dst: &mut [f32],
    m: usize,
    n: usize,
    k: usize,
    lhs: (*const f32, isize, isize),
    rhs: (*const f32, isize, isize),
    accumulate: bool,
) {
    let threads = rayon::current_num_threads();
    multiply(dst.as_mut_ptr(), dst.len(), [m, n, k], lhs, rhs, 1.0, accumulate, parallelism(m * n * k, threads));
}

/// `lhs[m, k] · rhs[k, n]` as a new row-major buffer on up to `threads` of rayon's threads,
/// written once by the product (no zeroing pass first: that was 3% of a training step).
fn product_new(
    [m, n, k]: [usize; 3],
    lhs: (*const f32, isize, isize),
    rhs: (*const f32, isize, isize),
    threads: usize,
) -> Vec<f32> {
    let mut dst = uninit(m * n);
    multiply(dst.as_mut_ptr().cast(), dst.len(), [m, n, k], lhs, rhs, 1.0, false, parallelism(m * n * k, threads));
    // SAFETY: the product wrote all m·n elements (`read_dst` off: none was read first).
    unsafe { assume_init(dst) }
}

/// `threads` of rayon's threads for a product of `size` multiply-adds, when it pays for them.
fn parallelism(size: usize, threads: usize) -> gemm::Parallelism {
    if size >= 1 << 15 && threads > 1 {
        gemm::Parallelism::Rayon(threads)
    } else {
        gemm::Parallelism::None
    }
}

/// `dst[m, n] = scale · lhs[m, k] · rhs[k, n]` on this thread only, for kernels that already
/// run in parallel over independent products (attention's heads); `dst` need not be written
/// before, and comes back as the floats the product wrote.
#[allow(clippy::too_many_arguments)]
pub(super) fn product_into(
    dst: &mut [MaybeUninit<f32>],
    m: usize,
    n: usize,
    k: usize,
    lhs: (*const f32, isize, isize),
    rhs: (*const f32, isize, isize),
    scale: f32,
) -> &mut [f32] {
    multiply(dst.as_mut_ptr().cast(), dst.len(), [m, n, k], lhs, rhs, scale, false, gemm::Parallelism::None);
    // SAFETY: the product wrote all m·n elements of `dst` (checked to be its length).
    unsafe { assume_init_mut(dst) }
}

/// `dst[m, n] = scale · lhs[m, k] · rhs[k, n]` into a strided destination (column stride 1,
/// row stride `dst_rs`) on this thread only: attention writes each head's rows straight into
/// a `[batch, len, heads, d]` buffer.
///
/// # Safety
/// `dst` must address an `m × n` matrix with row stride `dst_rs` inside a live buffer that no
/// other thread reads or writes at those elements during the call, and that overlaps neither
/// operand.
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn product_to(
    dst: *mut f32,
    dst_rs: isize,
    [m, n, k]: [usize; 3],
    lhs: (*const f32, isize, isize),
    rhs: (*const f32, isize, isize),
    scale: f32,
) {
    // SAFETY: the caller's contract above; operands as in `multiply`.
    unsafe { call_gemm(dst, dst_rs, [m, n, k], lhs, rhs, scale, false, gemm::Parallelism::None) }
}

/// The one call into `gemm`: `dst` row-major `[m, n]` (`len` values), operands as `(pointer,
/// column stride, row stride)`; `dst` is read first only if `accumulate`.
#[allow(clippy::too_many_arguments)]
fn multiply(
    dst: *mut f32,
    len: usize,
    [m, n, k]: [usize; 3],
    lhs: (*const f32, isize, isize),
    rhs: (*const f32, isize, isize),
    scale: f32,
    accumulate: bool,
    parallelism: gemm::Parallelism,
) {
    assert_eq!(len, m * n, "product: destination of the wrong size");
    // SAFETY: `dst` addresses `len` = m×n contiguous values of one live buffer (checked above,
    // row stride n, column stride 1), written before they are read unless `accumulate` says
    // they hold values already. `lhs` and `rhs` address m×k and k×n matrices inside buffers
    // the callers keep alive and unchanged for this call (slices through `view`, or tensors
    // held by attention's `Heads`), and `dst` is a fresh buffer that overlaps neither.
    unsafe { call_gemm(dst, n as isize, [m, n, k], lhs, rhs, scale, accumulate, parallelism) }
}

/// `gemm`'s `dst = dst·[accumulate] + scale · lhs · rhs`, the destination's columns contiguous
/// and its rows `dst_rs` apart.
///
/// # Safety
/// As [`multiply`] and [`product_to`] state for their destinations and operands.
#[allow(clippy::too_many_arguments)]
unsafe fn call_gemm(
    dst: *mut f32,
    dst_rs: isize,
    [m, n, k]: [usize; 3],
    lhs: (*const f32, isize, isize),
    rhs: (*const f32, isize, isize),
    scale: f32,
    accumulate: bool,
    parallelism: gemm::Parallelism,
) {
    // SAFETY: the callers' contracts.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            dst,
            1,
            dst_rs,
            accumulate,
            lhs.0,
            lhs.1,
            lhs.2,
            rhs.0,
            rhs.1,
            rhs.2,
            1.0,
            scale,
            false,
            false,
            false,
            parallelism,
        )
    }
}

/// The forward kernel: the bias is written first, the product added to it.
pub(super) fn cpu(x: F, w: F, b: Option<F>, layout: Weight) -> F {
    let (shape, x) = super::cpu::values(x);
    let (w_shape, w) = super::cpu::values(w);
    let d_in = shape[shape.num_dims() - 1];
    let rows = x.len() / d_in.max(1);
    let d_out = if layout == Weight::InOut { w_shape[1] } else { w_shape[0] };
    assert_eq!(w.len(), d_in * d_out, "linear: weight of shape {w_shape:?} for {d_in} inputs");
    let w_view = match layout {
        Weight::InOut => view(&w, d_out, false),
        Weight::OutIn => view(&w, d_in, true),
    };
    let y = match b {
        Some(b) => {
            let (_, b) = super::cpu::values(b);
            // The slice taken once: a `Values` dereference a row (a view built, its layout
            // checked) took 1.9% of the Multi30k model's step.
            let b = &*b;
            let mut y = Vec::with_capacity(rows * d_out);
            (0..rows).for_each(|_| y.extend_from_slice(b));
            product(&mut y, rows, d_out, d_in, view(&x, d_in, false), w_view, true);
            y
        }
        None => product_new([rows, d_out, d_in], view(&x, d_in, false), w_view, rayon::current_num_threads()),
    };
    let mut out = shape;
    let last = out.num_dims() - 1;
    out[last] = d_out;
    NdArrayTensor::from_data(TensorData::new(y, out))
}

/// The backward kernel: `dx`, `dW` (in the weight's layout) and, `with_bias`, `db`.
pub(super) fn cpu_backward(x: F, w: F, grad: F, layout: Weight, with_bias: bool) -> (F, F, Option<F>) {
    let shape = x.shape();
    // dx and dW are two products of the same size (rows·d_in·d_out multiply-adds): they run
    // side by side, each on half the threads. One at a time, gemm splits a product with few
    // output blocks (dW is d_in × d_out, 128 × 128 in nanoGPT's CPU model) over fewer
    // threads than there are, and the others wait. The weight's gradient (and the bias's) is
    // the longer of the two (a product reduced over all the rows: 541 against 469 µs for
    // nanoGPT's `512 → 128` map on a Xeon), so this thread takes it and another worker the
    // input's: the thread that waits for the other half is then the stealing worker, which
    // goes on looking for work, not this one, which would fall asleep and need waking.
    // Inside `overlap::backward` the step asks for the two apart instead
    // (`cpu_input_backward`, `cpu_weight_backward`) and leaves dW to a job of its own.
    let half = rayon::current_num_threads().div_ceil(2);
    let ((dw, db), dx) = rayon::join(
        || cpu_weight_backward(x, grad.clone(), layout, with_bias, half),
        || input(w, grad.clone(), layout, half),
    );
    let dx = NdArrayTensor::from_data(TensorData::new(dx, shape));
    (dx, dw, db)
}

/// `dx` alone, in the gradient's shape with its last axis `d_in` (the input's shape), on
/// all of rayon's threads.
pub(super) fn cpu_input_backward(w: F, grad: F, layout: Weight) -> F {
    let mut shape = grad.shape();
    let last = shape.num_dims() - 1;
    shape[last] = match layout {
        Weight::InOut => w.shape()[0],
        Weight::OutIn => w.shape()[1],
    };
    NdArrayTensor::from_data(TensorData::new(input(w, grad, layout, rayon::current_num_threads()), shape))
}

/// `dx = dy·Wᵀ` (`dy·W` for `OutIn`) as a row-major buffer, on up to `threads` threads.
fn input(w: F, grad: F, layout: Weight, threads: usize) -> Vec<f32> {
    let (w_shape, w) = super::cpu::values(w);
    let (_, grad) = super::cpu::values(grad);
    let [d_in, d_out] = match layout {
        Weight::InOut => [w_shape[0], w_shape[1]],
        Weight::OutIn => [w_shape[1], w_shape[0]],
    };
    let rows = grad.len() / d_out.max(1);
    match layout {
        Weight::InOut => product_new([rows, d_in, d_out], view(&grad, d_out, false), view(&w, d_out, true), threads),
        Weight::OutIn => product_new([rows, d_in, d_out], view(&grad, d_out, false), view(&w, d_in, false), threads),
    }
}

/// `dW` (in the weight's layout) and, `with_bias`, `db`, on up to `threads` threads.
pub(super) fn cpu_weight_backward(x: F, grad: F, layout: Weight, with_bias: bool, threads: usize) -> (F, Option<F>) {
    let (_, x) = super::cpu::values(x);
    let (grad_shape, grad) = super::cpu::values(grad);
    let d_out = grad_shape[grad_shape.num_dims() - 1];
    let rows = grad.len() / d_out.max(1);
    let d_in = x.len() / rows.max(1);
    let dw = match layout {
        Weight::InOut => product_new([d_in, d_out, rows], view(&x, d_in, true), view(&grad, d_out, false), threads),
        Weight::OutIn => product_new([d_out, d_in, rows], view(&grad, d_out, true), view(&x, d_in, false), threads),
    };
    let dw = match layout {
        Weight::InOut => tensor(dw, [d_in, d_out]),
        Weight::OutIn => tensor(dw, [d_out, d_in]),
    };
    // Summed only for a bias: a pass over all of `grad`.
    let db = with_bias.then(|| {
        let mut db = vec![0.0f32; d_out];
        for row in grad.chunks(d_out) {
            db.iter_mut().zip(row).for_each(|(s, &g)| *s += g);
        }
        tensor(db, [d_out])
    });
    (dw, db)
}

fn tensor<const D: usize>(values: Vec<f32>, shape: [usize; D]) -> F {
    NdArrayTensor::from_data(TensorData::new(values, shape))
}

/// `x·W + b` over the rows of `x` (every position of its last axis), fused where the backend
/// has a kernel. The kernel reads `x` as the matrix of its rows without reshaping it:
/// burn-ndarray 0.21's `reshape` copies even a contiguous tensor (it turns a borrowed view
/// into a new array), and position-wise maps would pay that on the way in and out, forward
/// and backward.
///
/// # Shapes
/// - `x`: `[..., d_in]`; `w`: `[d_in, d_out]` (`InOut`) or `[d_out, d_in]` (`OutIn`);
///   `b`: `[d_out]`; output: `[..., d_out]`
pub fn linear<B: Backend, const D: usize>(
    x: Tensor<B, D>,
    w: Tensor<B, 2>,
    b: Option<Tensor<B, 1>>,
    layout: Weight,
) -> Tensor<B, D> {
    use super::{same, FusedOps};
    fn on<B: Backend, K: FusedOps, const D: usize>(
        x: Tensor<B, D>,
        w: Tensor<B, 2>,
        b: Option<Tensor<B, 1>>,
        layout: Weight,
    ) -> Tensor<B, D> {
        let x = same::<Tensor<B, D>, Tensor<K, D>>(x).into_primitive().tensor();
        let w = same::<Tensor<B, 2>, Tensor<K, 2>>(w).into_primitive().tensor();
        let b = b.map(|b| same::<Tensor<B, 1>, Tensor<K, 1>>(b).into_primitive().tensor());
        same(Tensor::<K, D>::from_primitive(TensorPrimitive::Float(K::fused_linear(x, w, b, layout))))
    }
    let over_rows = |x: Tensor<B, D>, w, b| {
        let dims = x.dims();
        let d_in = dims[D - 1];
        let y = composed(x.reshape([dims.iter().product::<usize>() / d_in.max(1), d_in]), w, b, layout);
        let mut out = dims;
        out[D - 1] = y.dims()[1];
        y.reshape(out)
    };
    super::on_kernels!(B, K => on::<B, K, D>(x, w, b, layout), _ => {
        super::on_kernels!(tracked B, K => on::<B, K, D>(x, w, b, layout), _ => over_rows(x, w, b))
    })
}
