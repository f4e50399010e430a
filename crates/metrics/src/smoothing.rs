//! BLEU's smoothing of zero n-gram precisions, as sacreBLEU implements them.
//!
//! The methods are those of Chen & Cherry, "A Systematic Comparison of Smoothing Techniques
//! for Sentence-Level BLEU", WMT 2014 (<http://aclweb.org/anthology/W14-3346>), whose
//! default values sacreBLEU adopts: `floor` is their method 1 (ε = 0.1), `add-k` their
//! method 2 (k = 1, for n ≥ 2), `exp` their method 3 (NIST's, mteval-v13a.pl's). The loop in
//! `smoothed_precisions` is sacreBLEU's `BLEU.compute_bleu`, step for step, so that the
//! floating-point results are the same; unlike it, the caller's counts are not modified.

use std::fmt;

use crate::MetricsError;

/// How zero n-gram precisions are smoothed.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Smoothing {
    /// `exp` (default): the k-th order with no match gets precision `1 / (2^k · total)`,
    /// k counting the zero-match orders so far.
    Exp,
    /// `floor`: an order with no match gets `value / total` in place of 0. Default 0.1.
    Floor(f64),
    /// `add-k`: `value` is added to the matches and the totals of orders n ≥ 2. Default 1.
    AddK(f64),
    /// `none`: a zero precision stays zero (and the score is then 0).
    None,
}

impl Smoothing {
    /// sacreBLEU's default value for `floor` (Chen & Cherry 2014).
    pub const FLOOR_DEFAULT: f64 = 0.1;
    /// sacreBLEU's default value for `add-k` (Chen & Cherry 2014).
    pub const ADD_K_DEFAULT: f64 = 1.0;

    /// The method named `name` (`exp`, `floor`, `add-k`, `none`), with `value` or the default.
    ///
    /// `value` must be finite and non-negative, and only `floor` and `add-k` take one.
    pub fn from_name(name: &str, value: Option<f64>) -> Result<Self, MetricsError> {
        let method = match name {
            "exp" => Smoothing::Exp,
            "floor" => Smoothing::Floor(value.unwrap_or(Self::FLOOR_DEFAULT)),
            "add-k" => Smoothing::AddK(value.unwrap_or(Self::ADD_K_DEFAULT)),
            "none" => Smoothing::None,
            _ => return Err(MetricsError::UnknownSmoothing(name.to_string())),
        };
        match (method, value) {
            (Smoothing::Exp | Smoothing::None, Some(_)) => Err(MetricsError::InvalidSmoothingValue {
                method: method.name(),
                reason: "takes no value (only floor and add-k do)".to_string(),
            }),
            (Smoothing::Floor(v) | Smoothing::AddK(v), _) if !(v.is_finite() && v >= 0.0) => {
                Err(MetricsError::InvalidSmoothingValue {
                    method: method.name(),
                    reason: format!("needs a finite non-negative value, not {v}"),
                })
            }
            _ => Ok(method),
        }
    }

    /// The method's name as sacreBLEU spells it.
    pub fn name(self) -> &'static str {
        match self {
            Smoothing::Exp => "exp",
            Smoothing::Floor(_) => "floor",
            Smoothing::AddK(_) => "add-k",
            Smoothing::None => "none",
        }
    }
}

/// The signature form: `exp`, `none`, or the name with its value, `floor[0.10]`, `add-k[1.00]`.
impl fmt::Display for Smoothing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Smoothing::Floor(v) | Smoothing::AddK(v) => write!(f, "{}[{v:.2}]", self.name()),
            _ => f.write_str(self.name()),
        }
    }
}

/// The smoothed n-gram precisions in percent, and how many orders the geometric mean takes.
///
/// `correct[n-1]` and `total[n-1]` are the clipped matches and the hypothesis n-grams of order
/// n. Orders stop at the first one with no n-gram at all (its precision and the following
/// stay 0). With `effective_order`, the mean is over the orders before that stop; otherwise
/// over all orders, so a 0 there makes the score 0.
///
/// Example: correct `[3, 1, 0, 0]`, total `[4, 3, 2, 1]`, `Exp` →
/// `[75, 33.3…, 100/(2·2), 100/(4·1)]`, 4 orders.
pub(crate) fn smoothed_precisions<const N: usize>(
    correct: &[u64; N],
    total: &[u64; N],
    smoothing: Smoothing,
    effective_order: bool,
) -> ([f64; N], usize) {
    let mut precisions = [0.0; N];
    let mut eff_order = N;
    let mut mteval_factor = 1.0;
    for n in 1..=N {
        let (mut matched, mut count) = (correct[n - 1] as f64, total[n - 1] as f64);
        if let Smoothing::AddK(k) = smoothing {
            if n > 1 {
                matched += k;
                count += k;
            }
        }
        if count == 0.0 {
            break;
        }
        if effective_order {
            eff_order = n;
        }
        precisions[n - 1] = if matched == 0.0 {
            match smoothing {
                Smoothing::Exp => {
                    mteval_factor *= 2.0;
                    100.0 / (mteval_factor * count)
                }
                Smoothing::Floor(v) => 100.0 * v / count,
                Smoothing::AddK(_) | Smoothing::None => 0.0,
            }
        } else {
            100.0 * matched / count
        };
    }
    (precisions, eff_order)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signature_form_shows_values_with_two_decimals() {
        assert_eq!(Smoothing::from_name("floor", None).unwrap().to_string(), "floor[0.10]");
        assert_eq!(Smoothing::from_name("add-k", None).unwrap().to_string(), "add-k[1.00]");
        assert_eq!(Smoothing::from_name("exp", None).unwrap().to_string(), "exp");
        assert_eq!(Smoothing::from_name("none", None).unwrap().to_string(), "none");
    }

    #[test]
    fn value_for_a_method_without_one_is_an_error() {
        assert!(Smoothing::from_name("exp", Some(0.5)).is_err());
        assert!(Smoothing::from_name("floor", Some(-1.0)).is_err());
        assert!(Smoothing::from_name("floor", Some(f64::NAN)).is_err());
        assert!(Smoothing::from_name("Exp", None).is_err());
    }

    #[test]
    fn exp_smoothing_halves_each_further_zero_order() {
        let (p, eff) = smoothed_precisions(&[3, 1, 0, 0], &[4, 3, 2, 1], Smoothing::Exp, false);
        assert_eq!(p, [75.0, 100.0 / 3.0, 100.0 / 4.0, 100.0 / 4.0]);
        assert_eq!(eff, 4);
    }

    #[test]
    fn add_k_leaves_unigrams_alone_and_fills_empty_orders() {
        let (p, _) = smoothed_precisions(&[2, 0, 0, 0], &[2, 1, 0, 0], Smoothing::AddK(1.0), false);
        assert_eq!(p, [100.0, 50.0, 100.0, 100.0]);
    }

    #[test]
    fn effective_order_stops_at_the_first_order_without_ngrams() {
        let (_, eff) = smoothed_precisions(&[2, 1, 0, 0], &[2, 1, 0, 0], Smoothing::Exp, true);
        assert_eq!(eff, 2);
    }
}
