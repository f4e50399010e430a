//! How our GPU product kernel (`fused/cube/product.rs`) writes its multiply-adds, by the
//! environment variable `ATTEND_GPU_FMA`: `on` (the default), one fused multiply-add
//! instruction each (`fma`); `off`, a multiply and then an add (`acc += x·b`), as the kernel
//! wrote them until the forty-first session, which a driver may or may not fuse. `off` is
//! there so that one build can time both on a GPU: on lavapipe they give the same bits (Mesa
//! fuses them either way), so only a GPU's time tells them apart (docs/benchmarks.md, "Fused
//! multiply-adds and wide tiles in the product kernel").

use std::sync::OnceLock;

/// The values `ATTEND_GPU_FMA` takes, for its errors.
const EXPECTED: &str = "on (the default: fused multiply-adds) or off (a multiply, then an add)";

/// A value of `ATTEND_GPU_FMA`: `on` (or empty) or `off`; anything else is an error that
/// names the variable and the values it takes.
pub fn parse_product_fma(value: &str) -> Result<bool, String> {
    crate::env_switch::parse("ATTEND_GPU_FMA", value, &[("", true), ("on", true), ("off", false)], EXPECTED)
}

/// `ATTEND_GPU_FMA` read: unset, or a value [`parse_product_fma`] takes.
pub fn product_fma_from_env() -> Result<bool, String> {
    crate::env_switch::read("ATTEND_GPU_FMA", true, EXPECTED, parse_product_fma)
}

/// Whether the product kernel fuses its multiply-adds, read once from the environment (a
/// value the runner would refuse counts as `on` here; `xtask` checks it before a run).
pub fn product_fma() -> bool {
    static ENV: OnceLock<bool> = OnceLock::new();
    *ENV.get_or_init(|| product_fma_from_env().unwrap_or(true))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn product_fma_setting_takes_on_off_and_empty_and_names_the_variable_on_anything_else() {
        assert_eq!(parse_product_fma(""), Ok(true));
        assert_eq!(parse_product_fma(" on "), Ok(true));
        assert_eq!(parse_product_fma("off"), Ok(false));
        for wrong in ["yes", "1", "fused"] {
            let error = parse_product_fma(wrong).unwrap_err();
            assert!(error.contains("ATTEND_GPU_FMA") && error.contains("off") && error.contains(wrong), "{error}");
        }
    }
}
