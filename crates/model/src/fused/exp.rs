//! `e^z` for `z ≤ 0` in f32, branch-free and without calls, so that the loops of the softmax,
//! cross-entropy and GELU-backward kernels vectorize (libm's `expf` is a scalar call: 3.5% of
//! a training step's CPU time, and it kept GELU's backward loop scalar, another 7%).
//!
//! Range reduction `z = n·ln 2 + r` with `n` the nearest integer to `z·log₂e` and
//! `|r| ≤ ½ ln 2` (`ln 2` in two parts, so `r` is exact to f32), then `e^r` as `1 + r + r²·P(r)`
//! with `P` of degree 5 (the classic minimax fit used by Cephes' `expf`), then `2ⁿ` built from its
//! bits. `n` is rounded by adding and subtracting 1.5·2²³ (f32 addition rounds to nearest),
//! and the same sum's low bits give `2ⁿ`'s exponent field. Below `z = −80` the result is 0:
//! `e^−80 ≈ 2e-35` is far below what a sum holding a 1 resolves, and masked attention scores
//! (−1e9) land there. Relative error below 3e-7 on `[−80, 0]` (the test measures it against
//! f64 `exp`), about two units in the last place.

/// 1.5·2²³: adding it to an `f32` of magnitude below 2²² rounds to an integer, kept in the
/// low mantissa bits.
const ROUND: f32 = 12_582_912.0;
const LOG2_E: f32 = core::f32::consts::LOG2_E;
/// `ln 2 = LN2_HI + LN2_LO`, `LN2_HI` with few enough bits that `n·LN2_HI` is exact.
const LN2_HI: f32 = 0.693_359_4; // 355/512 exactly
const LN2_LO: f32 = -2.121_944_4e-4;
/// `e^r ≈ 1 + r + r²·P(r)`, highest power first.
const P: [f32; 6] = [1.987_569_2e-4, 1.398_2e-3, 8.333_452e-3, 4.166_579_6e-2, 0.166_666_65, 0.5];

/// `e^z` for `z ≤ 0`; 0 below −80. (Positive `z` is clamped to 0: callers subtract a maximum.)
#[inline(always)]
pub fn exp_nonpositive(z: f32) -> f32 {
    let x = z.clamp(-80.0, 0.0);
    let shifted = x * LOG2_E + (ROUND + 127.0);
    let n = shifted - (ROUND + 127.0);
    let r = (x - n * LN2_HI) - n * LN2_LO;
    let mut p = P[0];
    for c in &P[1..] {
        p = p * r + c;
    }
    let e_r = p * r * r + r + 1.0;
    // The low bits of `shifted` hold n + 127 (≥ 11 here): shifted into the exponent field, 2ⁿ.
    let two_n = f32::from_bits(shifted.to_bits() << 23);
    if z < -80.0 {
        0.0
    } else {
        e_r * two_n
    }
}

/// 1.5·2⁵²: adding it to an `f64` of magnitude below 2⁵¹ rounds to an integer, kept in the
/// low mantissa bits.
const ROUND_F64: f64 = 6_755_399_441_055_744.0;
/// `ln 2 = LN2_HI_F64 + LN2_LO_F64`, the high part with its last 32 bits zero (fdlibm's
/// split), so that `n·LN2_HI_F64` is exact for the `|n| < 1,024` met here.
const LN2_HI_F64: f64 = f64::from_bits(0x3FE6_2E42_FEE0_0000); // 6.93147180369123816490e-1
const LN2_LO_F64: f64 = f64::from_bits(0x3DEA_39EF_3579_3C76); // 1.90821492927058770002e-10
/// Below this `e^z` is 0 here (`e^−700 ≈ 1e-304`, still a normal `f64`, so that `2ⁿ` can be
/// built from its exponent field).
const FLOOR_F64: f64 = -700.0;

/// `e^z` in `f64` for `z ≤ 0`, 0 below −700, within 2 units in the last place of libm's `exp`
/// (the test measures it), branch-free so that a loop over it vectorizes (beam search's
/// log-normalizer, `log_sum_exp_f64` in `cross_entropy.rs`): the same range
/// reduction as [`exp_nonpositive`] with `ln 2` in fdlibm's two parts, then `e^r` for
/// `|r| ≤ ½ ln 2` as its Taylor series to `r¹³` (the first term left out is about 4e-18 of the
/// sum), in Horner's form.
#[inline(always)]
pub fn exp_nonpositive_f64(z: f64) -> f64 {
    let x = z.clamp(FLOOR_F64, 0.0);
    let shifted = x * core::f64::consts::LOG2_E + (ROUND_F64 + 1023.0);
    let n = shifted - (ROUND_F64 + 1023.0);
    let r = (x - n * LN2_HI_F64) - n * LN2_LO_F64;
    // 1/13!, 1/12!, …, 1/2!, 1, 1: e^r = Σ r^j / j!.
    let mut p = 1.0 / 6_227_020_800.0;
    for factorial in
        [479_001_600.0, 39_916_800.0, 3_628_800.0, 362_880.0, 40_320.0, 5_040.0, 720.0, 120.0, 24.0, 6.0, 2.0, 1.0, 1.0]
    {
        p = p * r + 1.0 / factorial;
    }
    // The low bits of `shifted` hold n + 1023 (≥ 13 here): shifted into the exponent field, 2ⁿ.
    let two_n = f64::from_bits(shifted.to_bits() << 52);
    if z < FLOOR_F64 {
        0.0
    } else {
        p * two_n
    }
}

#[cfg(test)]
mod tests {
    use super::{exp_nonpositive, exp_nonpositive_f64};

    #[test]
    fn exp_f64_is_within_2_ulp_of_libm_exp_on_minus_700_to_0() {
        let mut worst = 0.0f64;
        for i in 0..=1_400_000 {
            // Steps that are not a multiple of ln 2's fractions, and the interval's ends.
            let z = -(i as f64) * 5e-4 - (i % 7) as f64 * 1.234_567e-5;
            let exact = z.exp();
            worst = worst.max((exp_nonpositive_f64(z) - exact).abs() / exact);
        }
        assert!(worst <= 2.0 * f64::EPSILON, "worst relative error {worst:e}");
        assert!(worst > 0.0, "the comparison ran");
        assert_eq!(exp_nonpositive_f64(0.0), 1.0);
        assert_eq!(exp_nonpositive_f64(-700.5), 0.0);
        assert_eq!(exp_nonpositive_f64(f64::NEG_INFINITY), 0.0);
    }

    #[test]
    fn exp_is_within_3e_7_relative_of_f64_exp_on_minus_80_to_0() {
        let mut worst = 0.0f64;
        for i in 0..=800_000 {
            let z = -(i as f32) * 1e-4;
            let exact = (z as f64).exp();
            worst = worst.max((exp_nonpositive(z) as f64 - exact).abs() / exact);
        }
        assert!(worst < 3e-7, "worst relative error {worst}");
        assert!(worst > 0.0, "the comparison ran");
    }

    #[test]
    fn exp_is_exact_at_0_and_0_far_below() {
        assert_eq!(exp_nonpositive(0.0), 1.0);
        assert_eq!(exp_nonpositive(-80.5), 0.0);
        assert_eq!(exp_nonpositive(-1e9), 0.0);
        assert_eq!(exp_nonpositive(f32::NEG_INFINITY), 0.0);
        assert!((exp_nonpositive(-1.0) - core::f32::consts::E.recip()).abs() < 1e-7);
    }
}
