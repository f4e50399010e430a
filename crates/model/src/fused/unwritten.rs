//! Output buffers the CPU kernels write before reading: allocated without the zeroing pass
//! (`uninit`), then taken as floats once every element is written (`assume_init`,
//! `assume_init_mut`). Shared by the products, the element-wise kernels, attention,
//! cross-entropy and AdamW.

use core::mem::MaybeUninit;

/// `n` values not yet written.
pub(super) fn uninit(n: usize) -> Vec<MaybeUninit<f32>> {
    let mut values = Vec::with_capacity(n);
    // SAFETY: `MaybeUninit` needs no initialization, and the capacity is `n`.
    unsafe { values.set_len(n) };
    values
}

/// `values` as the floats they now hold.
///
/// # Safety
/// Every element must have been written.
pub(super) unsafe fn assume_init(values: Vec<MaybeUninit<f32>>) -> Vec<f32> {
    let mut values = core::mem::ManuallyDrop::new(values);
    // SAFETY: `MaybeUninit<f32>` has `f32`'s layout; the caller vouches for the contents; the
    // allocation moves to the new vector (the old one is never dropped).
    unsafe { Vec::from_raw_parts(values.as_mut_ptr().cast::<f32>(), values.len(), values.capacity()) }
}

/// `values`, every one of them written, as floats.
///
/// # Safety
/// Every element must have been written.
pub(super) unsafe fn assume_init_mut(values: &mut [MaybeUninit<f32>]) -> &mut [f32] {
    // SAFETY: `MaybeUninit<f32>` has `f32`'s layout; the caller vouches for the contents.
    unsafe { &mut *(values as *mut [MaybeUninit<f32>] as *mut [f32]) }
}
