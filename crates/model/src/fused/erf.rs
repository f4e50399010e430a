//! `erf` in f32 as a rational function, for the GELU kernels: branch-free and without calls,
//! so the compiler vectorizes the loops that use it (libm's `erff` is a scalar call with
//! branches: it took 7% of a training step's CPU time).
//!
//! `erf(x) ≈ x·P(x²)/Q(x²)` on `[−4, 4]` (P of degree 6, Q of degree 4 in `x²`; a minimax
//! fit of the kind Eigen and XLA use for f32), and `±1` beyond, where `erf` is `±1` to f32
//! precision (`1 − erf(4) ≈ 1.5e-8`). Maximum absolute error over `[−8, 8]`: below `5e-7`
//! (the test below measures it against f64 `erf`), a few units in the last place of values
//! near 1, the same order as f32 rounding of `½(1 + erf)` itself.
//!
//! Both polynomials are evaluated by Horner's rule in fused multiply-adds (`mul_add`: one
//! rounding per step, half the operations of a multiply and an add). A fused multiply-add is
//! exactly rounded wherever it runs: in one instruction where the CPU has FMA (the AVX2 and
//! AVX-512 builds of [`super::wide`]), in libm's `fmaf` in the baseline build, the same bits.

/// Numerator coefficients, highest power of `x²` first.
const P: [f32; 7] =
    [-2.726_142_3e-10, 2.770_681_4e-8, -2.101_024e-6, -5.692_506_4e-5, -7.349_906_3e-4, -2.954_6e-3, -1.609_603_3e-2];

/// Denominator coefficients, highest power of `x²` first.
const Q: [f32; 5] = [-1.456_607_2e-5, -2.133_740_5e-4, -1.682_827e-3, -7.373_329e-3, -1.426_474e-2];

/// The error function of `x`, absolute error below `5e-7`.
#[inline(always)]
pub fn erf(x: f32) -> f32 {
    let x = x.clamp(-4.0, 4.0);
    let x2 = x * x;
    let mut p = P[0];
    for &c in &P[1..] {
        p = p.mul_add(x2, c);
    }
    let mut q = Q[0];
    for &c in &Q[1..] {
        q = q.mul_add(x2, c);
    }
    x * p / q
}

#[cfg(test)]
mod tests {
    /// `erf` in f64 by its Taylor series (|x| < 3) and its continued fraction for `erfc`
    /// (beyond): independent of the approximation under test, exact to ~1e-15 here.
    fn erf64(x: f64) -> f64 {
        let a = x.abs();
        let value = if a < 3.0 {
            let (mut term, mut sum, mut n) = (a, a, 0.0);
            while term.abs() > 1e-17 * sum.abs() {
                n += 1.0;
                term *= -a * a / n;
                sum += term / (2.0 * n + 1.0);
            }
            sum * 2.0 / core::f64::consts::PI.sqrt()
        } else {
            // erfc(a) = e^{-a²}/√π · 1/(a + 1/2/(a + 1/(a + 3/2/(a + 2/(a + ...)))))
            let mut fraction = a;
            for k in (1..60).rev() {
                fraction = a + (k as f64 / 2.0) / fraction;
            }
            1.0 - (-a * a).exp() / core::f64::consts::PI.sqrt() / fraction
        };
        value.copysign(x)
    }

    #[test]
    fn rational_erf_is_within_5e_7_of_exact_erf_on_minus_8_to_8() {
        let mut worst = 0.0f64;
        for i in 0..=160_000 {
            let x = -8.0 + i as f64 * 1e-4;
            let error = (super::erf(x as f32) as f64 - erf64(x as f32 as f64)).abs();
            worst = worst.max(error);
        }
        assert!(worst < 5e-7, "worst absolute error {worst}");
        assert!(worst > 0.0, "the comparison ran");
    }

    #[test]
    fn rational_erf_is_odd_and_saturates() {
        for x in [0.1f32, 0.7, 1.3, 2.9, 3.99, 4.5, 100.0] {
            assert_eq!(super::erf(-x), -super::erf(x));
        }
        assert_eq!(super::erf(0.0), 0.0);
        assert!((super::erf(50.0) - 1.0).abs() < 1e-6);
    }
}
