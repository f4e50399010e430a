//! The CUDA C++ of attention's weights kernels (`attention_weights.rs`), compiled on the host by
//! CubeCL's CUDA compiler without a GPU (feature `kernel-source`), in either of CubeCL's
//! execution modes: `checked`, the mode of `launch` (every read and write of a tensor bounded by
//! its length: a read past it gives 0, a write past it is skipped), which our kernels took until
//! the forty-eighth session, or `unchecked`, the mode of `launch_unchecked` (the kernel's own
//! guards only), which they take now (`launch.rs`). `scripts/kernel_sass.sh` hands the source
//! to NVRTC and `nvdisasm` for an H100/H200's SASS, so that what checking costs is counted
//! offline, as `product_source.rs` does for the product kernel.

use burn_wgpu::{WgpuDevice, WgpuRuntime};
use cubecl::prelude::*;
use cubecl::server::ExecutionMode;

use super::attention_weights::{attention_weights_backward, attention_weights_forward};
use super::product_source::cuda_source;
use super::warp_rows::{ROWS, UNITS};

/// The CUDA C++ of attention's weights kernel in `f32` (`forward` or not: the backward) for rows
/// of `keys` keys read four at a time, with the causal mask (`u32`), compiled in CubeCL's
/// checked mode (`launch`'s) where `checked`, else unchecked (`launch_unchecked`'s).
pub fn attention_weights_cuda_source(forward: bool, keys: usize, checked: bool) -> String {
    let mode = if checked { ExecutionMode::Checked } else { ExecutionMode::Unchecked };
    assert!(keys.is_multiple_of(4) && keys <= super::attention_weights::MAX_KEYS, "{keys} keys");
    let client = WgpuRuntime::client(&WgpuDevice::default());
    let settings =
        KernelSettings::default().cube_dim(CubeDim::new_2d(UNITS as u32, ROWS as u32)).address_type(AddressType::U32);
    let mut launcher = KernelLauncher::<WgpuRuntime>::new(settings.clone());
    // Only the vector sizes (the arguments below) reach the definition: one element each will do.
    let arg = || {
        let handle = client.empty(4);
        // SAFETY: the kernel is defined, never launched, on these arguments.
        unsafe { TensorArg::<WgpuRuntime>::from_raw_parts(handle, [1, 1].into(), [1, 1].into()) }
    };
    type Rows = Tensor<Vector<f32, Const<4>>>;
    let rows = |launcher: &mut KernelLauncher<WgpuRuntime>| <Rows as LaunchArg>::register(arg(), launcher);
    let integers = |launcher: &mut KernelLauncher<WgpuRuntime>| <Tensor<u32> as LaunchArg>::register(arg(), launcher);
    let chunks = keys.div_ceil(UNITS * 4);
    let [float, integer] = [f32::as_type_native_unchecked(), u32::as_type_native_unchecked()].map(|t| t.storage_type());
    // The operands are registered in the kernel's order, then its scalars (whose compilation
    // argument is `()`: their values are read at run time).
    if forward {
        let l = &mut launcher;
        let (x, mask, key, weights, dropped) = (rows(l), integers(l), integers(l), rows(l), rows(l));
        for _ in 0..2 {
            <f32 as LaunchArg>::register(0.0f32, l);
        }
        <u32 as LaunchArg>::register(0u32, l);
        <f32 as LaunchArg>::register(0.0f32, l);
        let kernel = attention_weights_forward::AttentionWeightsForward::<WgpuRuntime>::new(
            settings,
            client.clone(),
            x,
            mask,
            key,
            weights,
            dropped,
            (),
            (),
            (),
            (),
            4,
            true,
            chunks,
            [float, integer, integer],
        );
        cuda_source(kernel, mode)
    } else {
        let l = &mut launcher;
        let (weights, dropped, grad, mask, dx) = (rows(l), rows(l), rows(l), integers(l), rows(l));
        for _ in 0..2 {
            <f32 as LaunchArg>::register(0.0f32, l);
        }
        let kernel = attention_weights_backward::AttentionWeightsBackward::<WgpuRuntime>::new(
            settings,
            client.clone(),
            weights,
            dropped,
            grad,
            mask,
            dx,
            (),
            (),
            4,
            true,
            chunks,
            [float, integer],
        );
        cuda_source(kernel, mode)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuda_source_of_attention_weights_kernels_bounds_its_reads_again_only_in_checked_mode() {
        let _turn = super::super::tests::serial();
        for forward in [true, false] {
            let name = if forward { "attention_weights_forward" } else { "attention_weights_backward" };
            let unchecked = attention_weights_cuda_source(forward, 256, false);
            let checked = attention_weights_cuda_source(forward, 256, true);
            for source in [&unchecked, &checked] {
                assert_eq!(source.matches("__global__").count(), 1, "{source}");
                assert!(source.contains(name) && source.contains("__launch_bounds__(256)"), "{source}");
            }
            // Checked mode clamps each read's index to the buffer's length (`min`) and selects.
            let clamps = |source: &str| source.matches("min(").count();
            assert!(clamps(&checked) > clamps(&unchecked), "{name}: checked mode adds its bounds");
            assert!(checked.len() > unchecked.len(), "{name}");
        }
    }
}
