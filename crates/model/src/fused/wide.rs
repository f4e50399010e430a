//! Element-wise loops compiled for the CPU's widest vector unit, chosen at run time.
//!
//! The crate is built for the baseline x86-64 (SSE2: 4 lanes of f32), so that one binary runs
//! everywhere. [`wide`] runs a loop body compiled again with AVX-512 (16 lanes) or AVX2 (8
//! lanes) enabled, the widest the CPU has, as `gemm` does for its micro-kernels. The results
//! are the same bits either way: the loops are element-wise or add in an order the source
//! fixes (no fast-math, so the compiler neither reassociates sums nor fuses multiply-adds), so
//! exact resume holds across machines.

/// Runs `body`, compiled with AVX-512 or else AVX2 where the CPU has it. Write the closure
/// `#[inline(always)] || …`: only a body inlined into [`with_avx512`] or [`with_avx2`] is
/// compiled for their features, and LLVM's own cost model declines to inline most loop bodies.
#[inline(always)]
pub(super) fn wide<R>(body: impl FnOnce() -> R) -> R {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx512dq")
            && std::arch::is_x86_feature_detected!("fma")
        {
            // SAFETY: the CPU has AVX-512 F and DQ and FMA (checked just above; a virtual
            // machine may hide FMA even where AVX-512 F implies it); AVX-512 F implies AVX2.
            return unsafe { with_avx512(body) };
        }
        if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
            // SAFETY: the CPU has AVX2 and FMA (checked just above).
            return unsafe { with_avx2(body) };
        }
    }
    body()
}

/// `body` inlined into a function compiled with AVX-512 (F and DQ: 16 lanes of f32, and the
/// conversions between f32, f64 and integers the f64 sums and `exp`'s exponent bits use) and
/// FMA (for `mul_add` as one instruction), each checked at run time.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512dq,avx2,fma")]
unsafe fn with_avx512<R>(body: impl FnOnce() -> R) -> R {
    body()
}

/// `body` inlined into a function compiled with AVX2 and FMA (a closure without target
/// features may be inlined into a caller with more; its loops are then vectorized for the
/// caller's features). Every CPU with AVX2 so far has FMA; one without takes the baseline.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn with_avx2<R>(body: impl FnOnce() -> R) -> R {
    body()
}

/// The sum of `values` in eight interleaved partial sums (a loop the compiler vectorizes; a
/// single running sum must be added in order, one element at a time).
#[inline(always)]
pub(super) fn lanes_sum(values: &[f32]) -> f32 {
    let mut lanes = [0.0f32; 8];
    let chunks = values.chunks_exact(8);
    let rest: f32 = chunks.remainder().iter().sum();
    for chunk in chunks {
        for (lane, v) in lanes.iter_mut().zip(chunk) {
            *lane += v;
        }
    }
    lanes.iter().sum::<f32>() + rest
}

/// `Σ f(vᵢ)` in f64, in 32 interleaved partial sums (four vectors of AVX-512's eight f64 lanes:
/// one running sum, or one vector of them, is a chain of dependent additions, four cycles
/// apiece, and a LayerNorm row of 128 made four such chains of 16), added up as a tree at the
/// end. A remainder below 32 goes eight at a time into the first eight, the last few into
/// one sum of their own.
#[inline(always)]
pub(super) fn lanes_sum_f64(values: &[f32], f: impl Fn(f32) -> f64) -> f64 {
    let mut lanes = [0.0f64; 32];
    let chunks = values.chunks_exact(32);
    let eights = chunks.remainder().chunks_exact(8);
    let rest: f64 = eights.remainder().iter().map(|&v| f(v)).sum();
    for chunk in chunks {
        for (lane, &v) in lanes.iter_mut().zip(chunk) {
            *lane += f(v);
        }
    }
    for chunk in eights {
        for (lane, &v) in lanes.iter_mut().zip(chunk) {
            *lane += f(v);
        }
    }
    let mut width = lanes.len();
    while width > 1 {
        width /= 2;
        let (low, high) = lanes.split_at_mut(width);
        low.iter_mut().zip(&high[..width]).for_each(|(l, h)| *l += h);
    }
    lanes[0] + rest
}

/// `Σ aᵢ·bᵢ` in eight interleaved partial sums (over the shorter of the two).
#[inline(always)]
pub(super) fn lanes_dot(a: &[f32], b: &[f32]) -> f32 {
    let n = a.len().min(b.len());
    let (a, b) = (&a[..n], &b[..n]);
    let mut lanes = [0.0f32; 8];
    let (chunks_a, chunks_b) = (a.chunks_exact(8), b.chunks_exact(8));
    let rest: f32 = chunks_a.remainder().iter().zip(chunks_b.remainder()).map(|(x, y)| x * y).sum();
    for (ca, cb) in chunks_a.zip(chunks_b) {
        for ((lane, x), y) in lanes.iter_mut().zip(ca).zip(cb) {
            *lane += x * y;
        }
    }
    lanes.iter().sum::<f32>() + rest
}

/// The largest of `values` (−∞ for none), eight lanes at a time: the same value in any order,
/// and NaNs are passed over as a running `f32::max` passes over them.
#[inline(always)]
pub(super) fn lanes_max(values: &[f32]) -> f32 {
    let mut lanes = [f32::NEG_INFINITY; 8];
    let chunks = values.chunks_exact(8);
    let rest = chunks.remainder().iter().copied().fold(f32::NEG_INFINITY, f32::max);
    for chunk in chunks {
        for (lane, &v) in lanes.iter_mut().zip(chunk) {
            *lane = if v > *lane { v } else { *lane };
        }
    }
    lanes.iter().copied().fold(rest, f32::max)
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::{lanes_dot, lanes_max, lanes_sum, lanes_sum_f64, with_avx2, with_avx512};
    use crate::fused::erf::erf;
    use crate::fused::exp::exp_nonpositive;

    /// What the kernels' loops are made of: an element-wise GELU-like formula through `exp`
    /// and `erf`, and an eight-lane sum. Inlined, as the kernels' bodies are, so that it is
    /// compiled once for each caller's features.
    #[inline(always)]
    fn body(x: &[f32], out: &mut [f32]) -> f32 {
        for (o, &v) in out.iter_mut().zip(x) {
            *o = v * erf(v * 0.7) + exp_nonpositive(-0.5 * v * v) / (1.0 + v * v);
        }
        lanes_sum(out)
    }

    #[test]
    fn the_avx2_build_of_a_loop_gives_the_baseline_builds_bits() {
        if !(std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")) {
            eprintln!("no AVX2 and FMA on this CPU: only the baseline build runs here");
            return;
        }
        let x: Vec<f32> = (0..4099).map(|i| (i as f32 - 2000.0) * 0.0037).collect();
        let (mut baseline, mut avx2) = (vec![0.0f32; x.len()], vec![0.0f32; x.len()]);
        let sum = body(&x, &mut baseline);
        // SAFETY: the CPU has AVX2 (checked above).
        let wide_sum = unsafe {
            with_avx2(
                #[inline(always)]
                || body(&x, &mut avx2),
            )
        };
        assert_eq!(sum.to_bits(), wide_sum.to_bits());
        assert!(baseline.iter().zip(&avx2).all(|(a, b)| a.to_bits() == b.to_bits()));
    }

    #[test]
    fn the_avx512_build_of_a_loop_gives_the_baseline_builds_bits() {
        if !(std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx512dq")
            && std::arch::is_x86_feature_detected!("fma"))
        {
            eprintln!("no AVX-512 on this CPU: only the baseline build runs here");
            return;
        }
        let x: Vec<f32> = (0..4099).map(|i| (i as f32 - 2000.0) * 0.0037).collect();
        let (mut baseline, mut avx512) = (vec![0.0f32; x.len()], vec![0.0f32; x.len()]);
        let sum = body(&x, &mut baseline);
        let f64_sum = lanes_sum_f64(&x, |v| (v * v) as f64);
        // SAFETY: the CPU has AVX-512 F and DQ (checked above).
        let (wide_sum, wide_f64_sum) = unsafe {
            with_avx512(
                #[inline(always)]
                || (body(&x, &mut avx512), lanes_sum_f64(&x, |v| (v * v) as f64)),
            )
        };
        assert_eq!(sum.to_bits(), wide_sum.to_bits());
        assert_eq!(f64_sum.to_bits(), wide_f64_sum.to_bits());
        assert!(baseline.iter().zip(&avx512).all(|(a, b)| a.to_bits() == b.to_bits()));
    }

    /// The lane reductions take every element, the remainders after the last full 32 and 8
    /// too: on small integers (exact in f32) they equal the plain sums, and the max is the max
    /// wherever it lies.
    #[test]
    fn lane_reductions_cover_every_element_including_the_remainder() {
        for n in 0..75 {
            let a: Vec<f32> = (0..n).map(|i| ((i * 7) % 11) as f32 - 5.0).collect();
            let b: Vec<f32> = (0..n).map(|i| ((i * 5) % 9) as f32 - 3.0).collect();
            assert_eq!(lanes_sum(&a), a.iter().sum::<f32>(), "sum of {n}");
            assert_eq!(lanes_sum_f64(&a, |v| (v * v) as f64), a.iter().map(|v| (v * v) as f64).sum::<f64>(), "f64 {n}");
            assert_eq!(lanes_dot(&a, &b), a.iter().zip(&b).map(|(x, y)| x * y).sum::<f32>(), "dot of {n}");
            for top in 0..n {
                let mut c = a.clone();
                c[top] = 100.0;
                assert_eq!(lanes_max(&c), 100.0, "max at {top} of {n}");
            }
        }
        assert_eq!(lanes_max(&[]), f32::NEG_INFINITY);
        assert_eq!(lanes_max(&[f32::NAN, 1.0, f32::NAN]), 1.0, "NaN passed over, as f32::max does");
    }
}
