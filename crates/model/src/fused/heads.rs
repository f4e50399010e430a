//! Attention's heads where they lie, for the CPU kernels: [`Heads`] reads each head's matrix
//! of a tensor through its strides (no gathered copies, transposes for free), and
//! [`Interleaved`] writes each head's result into a buffer that already has the layout the
//! model wants next (`[batch, len, heads, d]`, or one block of a packed `[batch, len, Q|K|V]`
//! row).
//!
//! Both serve [`super::attention`] (separate `Q`, `K`, `V` tensors) and
//! [`super::attention_packed`] (the three as blocks of the rows of one product, where
//! [`Packing`] says).

use core::mem::MaybeUninit;

use burn::tensor::TensorData;
use burn_ndarray::NdArrayTensor;

use super::linear::product_to;

pub(super) type F = burn::tensor::ops::FloatTensor<burn_ndarray::NdArray<f32>>;

/// Where a packed row holds what: `heads` query heads of width `d_k`, then as many key heads
/// (`d_k`), then as many value heads (`d_v`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Packing {
    pub heads: usize,
    pub d_k: usize,
    pub d_v: usize,
}

impl Packing {
    /// The head widths of the queries, keys and values.
    pub fn widths(&self) -> [usize; 3] {
        [self.d_k, self.d_k, self.d_v]
    }

    /// Where the queries, keys and values start in a row.
    pub fn offsets(&self) -> [usize; 3] {
        [0, self.heads * self.d_k, 2 * self.heads * self.d_k]
    }

    /// A row's width: `heads·(2·d_k + d_v)`.
    pub fn width(&self) -> usize {
        self.heads * (2 * self.d_k + self.d_v)
    }
}

/// A `[batch, heads, rows, cols]` view of a tensor, read where it lies: each head's matrix as
/// `gemm` reads it, through the tensor's strides (`Q`, `K`, `V` arrive as strided views of
/// `[batch, len, heads, d]`, or as blocks of one packed product; gathering them cost more than
/// the products of small heads).
pub(super) struct Heads {
    /// What the matrices point into: the tensor itself, or (not f32) a converted copy.
    keep: Keep,
    pub(super) dims: [usize; 4],
    strides: [isize; 4],
    /// The first element's distance from the start of what `keep` holds, in elements.
    offset: isize,
}

enum Keep {
    Tensor(F),
    Owned(Vec<f32>),
}

impl Heads {
    /// A `[batch, heads, rows, cols]` tensor.
    pub(super) fn new(t: F) -> Heads {
        let (keep, dims, strides) = kept(t);
        let dims = [dims[0], dims[1], dims[2], dims[3]];
        Heads { keep, dims, strides: [strides[0], strides[1], strides[2], strides[3]], offset: 0 }
    }

    /// The queries', keys' and values' heads of a `[batch, len, width]` tensor whose rows hold
    /// the three side by side, `packing` says how.
    pub(super) fn packed(t: F, packing: Packing) -> [Heads; 3] {
        let (keep, dims, strides) = kept(t);
        assert!(dims.len() == 3 && dims[2] == packing.width(), "packed attention: {dims:?} for {packing:?}");
        let (batch, len, column) = (dims[0], dims[1], strides[2]);
        let widths = packing.widths();
        let offsets = packing.offsets();
        let view = |part: usize, keep: Keep| Heads {
            keep,
            dims: [batch, packing.heads, len, widths[part]],
            strides: [strides[0], widths[part] as isize * column, strides[1], column],
            offset: offsets[part] as isize * column,
        };
        let copy = |keep: &Keep| match keep {
            Keep::Tensor(t) => Keep::Tensor(t.clone()),
            Keep::Owned(values) => Keep::Owned(values.clone()),
        };
        let (q, k) = (view(0, copy(&keep)), view(1, copy(&keep)));
        [q, k, view(2, keep)]
    }

    /// The first element's address (the data stays where it is while `self` lives).
    pub(super) fn base(&self) -> *const f32 {
        let start = match &self.keep {
            Keep::Tensor(NdArrayTensor::F32(storage)) => storage.view().as_ptr(),
            Keep::Tensor(_) => unreachable!("only f32 tensors are kept"),
            Keep::Owned(values) => values.as_ptr(),
        };
        start.wrapping_offset(self.offset)
    }

    /// Head `head` (batch-major) as `(pointer, column stride, row stride)`, or its transpose.
    pub(super) fn matrix(&self, base: *const f32, head: usize, transposed: bool) -> (*const f32, isize, isize) {
        let (b, h) = (head / self.dims[1], head % self.dims[1]);
        let ptr = base.wrapping_offset(b as isize * self.strides[0] + h as isize * self.strides[1]);
        let (rs, cs) = (self.strides[2], self.strides[3]);
        if transposed {
            (ptr, rs, cs)
        } else {
            (ptr, cs, rs)
        }
    }
}

/// `t` kept (f32 as it is, other types as a converted row-major copy), with its dimensions and
/// element strides.
fn kept(t: F) -> (Keep, Vec<usize>, Vec<isize>) {
    match t {
        NdArrayTensor::F32(_) => {
            let keep = Keep::Tensor(t);
            let Keep::Tensor(NdArrayTensor::F32(storage)) = &keep else { unreachable!("just built") };
            let view = storage.view();
            let (dims, strides) = (view.shape().to_vec(), view.strides().to_vec());
            (keep, dims, strides)
        }
        other => {
            let (shape, values) = super::cpu::values(other);
            let dims: Vec<usize> = (0..shape.num_dims()).map(|axis| shape[axis]).collect();
            let mut strides = vec![1isize; dims.len()];
            for axis in (0..dims.len().saturating_sub(1)).rev() {
                strides[axis] = strides[axis + 1] * dims[axis + 1] as isize;
            }
            (Keep::Owned(values.to_vec()), dims, strides)
        }
    }
}

/// An address that may cross threads (the data it points to is only read).
#[derive(Clone, Copy)]
pub(super) struct Address(pub(super) *const f32);
// SAFETY: the kernels only read through these addresses, from tensors kept alive and unchanged
// for the whole parallel loop.
unsafe impl Send for Address {}
unsafe impl Sync for Address {}

/// A buffer of `[batch, len, row]` values that the tasks of a parallel loop over (batch, head)
/// write into, each its own head's `len × d` matrix: head `h` at columns `h·d..` of a block of
/// `heads·d` columns that starts `column` into each row.
pub(super) struct Interleaved {
    base: *mut f32,
    heads: usize,
    len: usize,
    d: usize,
    /// Values per row (`heads·d`, or a packed row's whole width).
    row: usize,
}

// SAFETY: tasks write disjoint elements (one head each, `Interleaved::write`'s contract), and
// the buffer outlives the parallel loop that borrows it.
unsafe impl Send for Interleaved {}
unsafe impl Sync for Interleaved {}

impl Interleaved {
    /// `buffer` as `[batch, len, heads, d]`.
    pub(super) fn new(buffer: &mut [MaybeUninit<f32>], heads: usize, len: usize, d: usize) -> Interleaved {
        let [whole] = Self::blocks(buffer, heads, len, [d], heads * d);
        whole
    }

    /// `buffer` as `[batch, len, row]` rows of `N` blocks side by side, block `i` holding
    /// `heads` heads of width `widths[i]` (a packed gradient's `dQ | dK | dV`). The blocks
    /// share one pointer into the buffer, taken once.
    pub(super) fn blocks<const N: usize>(
        buffer: &mut [MaybeUninit<f32>],
        heads: usize,
        len: usize,
        widths: [usize; N],
        row: usize,
    ) -> [Interleaved; N] {
        assert!(heads * widths.iter().sum::<usize>() <= row, "blocks of {widths:?} x {heads} heads in rows of {row}");
        assert_eq!(buffer.len() % (len * row).max(1), 0, "a whole number of [len, row] blocks");
        let base = buffer.as_mut_ptr().cast::<f32>();
        let mut column = 0;
        widths.map(|d| {
            // `column` may equal the length of an empty buffer; `wrapping_add` keeps it defined.
            let block = Interleaved { base: base.wrapping_add(column), heads, len, d, row };
            column += heads * d;
            block
        })
    }

    /// `head`'s matrix (batch-major numbering) `= scale · lhs · rhs`, `[m, n, k]` with `m` =
    /// `len` and `n` = `d`.
    ///
    /// # Safety
    /// No other thread may write `head` at the same time; `lhs` and `rhs` as `product_to` asks.
    pub(super) unsafe fn write(
        &self,
        head: usize,
        [m, n, k]: [usize; 3],
        lhs: (*const f32, isize, isize),
        rhs: (*const f32, isize, isize),
        scale: f32,
    ) {
        assert!(m == self.len && n == self.d, "a head's matrix is len x d");
        let (b, h) = (head / self.heads, head % self.heads);
        let offset = b * self.len * self.row + h * self.d;
        // SAFETY: `offset` and the `m` rows of stride `row` after it lie inside the buffer
        // (checked in `blocks`, with b < batch); the caller keeps other threads off this head.
        unsafe { product_to(self.base.add(offset), self.row as isize, [m, n, k], lhs, rhs, scale) }
    }
}

/// `values` laid out `[batch, len, heads, d]` as a `[batch, heads, len, d]` tensor (a
/// permuted view: no copy).
pub(super) fn by_heads(values: Vec<f32>, dims: [usize; 4]) -> F {
    let array = ndarray::ArrayD::from_shape_vec(ndarray::IxDyn(&dims), values)
        .expect("the buffer holds the product of its dimensions");
    NdArrayTensor::from(array.permuted_axes(ndarray::IxDyn(&[0, 2, 1, 3])).into_shared())
}

/// `values` as a `[batch, len, width]` tensor.
pub(super) fn rows(values: Vec<f32>, dims: [usize; 3]) -> F {
    NdArrayTensor::from_data(TensorData::new(values, dims))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every element of every head, read through `matrix`'s pointer and strides.
    fn read(heads: &Heads) -> Vec<f32> {
        let [batch, n_heads, rows, cols] = heads.dims;
        let mut out = Vec::new();
        for head in 0..batch * n_heads {
            let (ptr, cs, rs) = heads.matrix(heads.base(), head, false);
            for r in 0..rows as isize {
                for c in 0..cols as isize {
                    // SAFETY: (r, c) lies inside the head's matrix, which `heads` keeps alive.
                    out.push(unsafe { *ptr.offset(r * rs + c * cs) });
                }
            }
        }
        out
    }

    /// A tensor of another float type is read through a converted row-major copy: its heads
    /// hold the same values, at the same places, as the f32 tensor's (every stride of the copy
    /// is used: batch, head, row, column all of different sizes).
    #[test]
    fn heads_of_an_f64_tensor_read_the_values_of_the_f32_one() {
        let dims = [2, 3, 4, 5];
        let values: Vec<f32> = (0..120).map(|i| i as f32 * 0.5 - 7.0).collect();
        let wide: Vec<f64> = values.iter().map(|&v| v as f64).collect();
        let f32_heads = Heads::new(NdArrayTensor::from_data(TensorData::new(values.clone(), dims)));
        let f64_heads = Heads::new(NdArrayTensor::from_data(TensorData::new(wide, dims)));
        assert!(matches!(f64_heads.keep, Keep::Owned(_)), "an f64 tensor is kept as a copy");
        assert_eq!(read(&f32_heads), values, "row-major f32: every element in order");
        assert_eq!(read(&f64_heads), values);
    }
}
