//! How our GPU product kernel (`fused/cube/product.rs`) writes its inner loop, by four
//! environment variables, each there so that one build can time both forms on a GPU (on
//! lavapipe each pair gives the same bits, so only a GPU's time tells them apart):
//!
//! - `ATTEND_GPU_FMA`: `on` (the default), one fused multiply-add instruction each (`fma`);
//!   `off`, a multiply and then an add (`acc += x·b`), as the kernel wrote them until the
//!   forty-first session, which a driver may or may not fuse (docs/benchmarks.md, "Fused
//!   multiply-adds and wide tiles in the product kernel").
//! - `ATTEND_GPU_LANES`: `pairs` (the default), a warp's lanes placed so that lanes `n` and
//!   `n ^ 1` read the same vector of `A` and lanes `n` and `n ^ 2` the same vector of `B`,
//!   which NVIDIA describes (for compute capability 7.x) as letting a 128-bit read of shared
//!   memory return in two passes where it takes four; `rows`, the forty-first session's placement (8 consecutive lanes a row of
//!   units), whose reads of `B` take four (docs/benchmarks.md, "A warp's lanes in pairs").
//! - `ATTEND_GPU_ADDRESSES`: `offsets` (the default), each read of the staged operands at
//!   this unit's base plus a constant, which the compiler makes the read's immediate offset,
//!   and products of whole tiles read and written unguarded (`exact_tiles`); `sums`, the
//!   kernel as it was until the forty-fifth session (the stage, the step and the unit added up
//!   at each read, which on CUDA cost two integer instructions a read, and every access
//!   guarded; docs/benchmarks.md, "The product kernel's SASS, read without a GPU").
//! - `ATTEND_GPU_STORES`: `inline` (the default), the next step's stores into the other stage
//!   at the end of the loop's body; `apart`, the same stores in a block of their own behind a
//!   test that always holds. On burn-wgpu's SPIR-V path (`vulkan`) cubecl-opt merges, within
//!   one block, a read and its store into one copy placed at the store, which defers the first
//!   unguarded read of each operand past the step's multiply-adds; `apart` leaves no such copy
//!   in the loop, for a few instructions a step on CUDA (docs/benchmarks.md, "Our kernels on
//!   burn-wgpu's SPIR-V path").

use std::cell::Cell;
use std::sync::OnceLock;

/// The product kernel's inner loop: fused multiply-adds or not, lanes in pairs or in rows,
/// reads at constant offsets or at summed indices, the next step's stores in the loop's block
/// or apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ProductForm {
    /// Each multiply-add one `fma` (`ATTEND_GPU_FMA=on`).
    pub fma: bool,
    /// A warp's lanes placed in pairs that read the same vectors (`ATTEND_GPU_LANES=pairs`).
    pub paired_lanes: bool,
    /// Reads of the staged operands at the unit's base plus a constant
    /// (`ATTEND_GPU_ADDRESSES=offsets`).
    pub constant_offsets: bool,
    /// The next step's stores at the end of the loop's body (`ATTEND_GPU_STORES=inline`).
    pub inline_stores: bool,
}

impl ProductForm {
    /// The defaults: `fma`, lanes in pairs, reads at constant offsets, stores inline.
    pub const DEFAULT: ProductForm =
        ProductForm { fma: true, paired_lanes: true, constant_offsets: true, inline_stores: true };
}

/// The values `ATTEND_GPU_FMA` takes, for its errors.
const EXPECTED_FMA: &str = "on (the default: fused multiply-adds) or off (a multiply, then an add)";

/// The values `ATTEND_GPU_LANES` takes, for its errors.
const EXPECTED_LANES: &str =
    "pairs (the default: lanes paired on the vectors they read) or rows (eight consecutive lanes a row)";

/// The values `ATTEND_GPU_ADDRESSES` takes, for its errors.
const EXPECTED_ADDRESSES: &str = "offsets (the default: each read at the unit's base plus a constant) \
     or sums (the stage, step and unit added at each read)";

/// The values `ATTEND_GPU_STORES` takes, for its errors.
const EXPECTED_STORES: &str = "inline (the default: the next step's stores end the loop's body) \
     or apart (in a block of their own)";

/// A value of `ATTEND_GPU_FMA`: `on` (or empty) or `off`; anything else is an error that
/// names the variable and the values it takes.
pub fn parse_product_fma(value: &str) -> Result<bool, String> {
    crate::env_switch::parse("ATTEND_GPU_FMA", value, &[("", true), ("on", true), ("off", false)], EXPECTED_FMA)
}

/// A value of `ATTEND_GPU_LANES`: `pairs` (or empty) or `rows`; anything else is an error
/// that names the variable and the values it takes.
pub fn parse_product_lanes(value: &str) -> Result<bool, String> {
    let choices = [("", true), ("pairs", true), ("rows", false)];
    crate::env_switch::parse("ATTEND_GPU_LANES", value, &choices, EXPECTED_LANES)
}

/// A value of `ATTEND_GPU_ADDRESSES`: `offsets` (or empty) or `sums`; anything else is an
/// error that names the variable and the values it takes.
pub fn parse_product_addresses(value: &str) -> Result<bool, String> {
    let choices = [("", true), ("offsets", true), ("sums", false)];
    crate::env_switch::parse("ATTEND_GPU_ADDRESSES", value, &choices, EXPECTED_ADDRESSES)
}

/// A value of `ATTEND_GPU_STORES`: `inline` (or empty) or `apart`; anything else is an error
/// that names the variable and the values it takes.
pub fn parse_product_stores(value: &str) -> Result<bool, String> {
    let choices = [("", true), ("inline", true), ("apart", false)];
    crate::env_switch::parse("ATTEND_GPU_STORES", value, &choices, EXPECTED_STORES)
}

/// `ATTEND_GPU_FMA`, `ATTEND_GPU_LANES`, `ATTEND_GPU_ADDRESSES` and `ATTEND_GPU_STORES` read:
/// each unset, or a value its parser takes.
pub fn product_form_from_env() -> Result<ProductForm, String> {
    Ok(ProductForm {
        fma: crate::env_switch::read("ATTEND_GPU_FMA", true, EXPECTED_FMA, parse_product_fma)?,
        paired_lanes: crate::env_switch::read("ATTEND_GPU_LANES", true, EXPECTED_LANES, parse_product_lanes)?,
        constant_offsets: crate::env_switch::read(
            "ATTEND_GPU_ADDRESSES",
            true,
            EXPECTED_ADDRESSES,
            parse_product_addresses,
        )?,
        inline_stores: crate::env_switch::read("ATTEND_GPU_STORES", true, EXPECTED_STORES, parse_product_stores)?,
    })
}

thread_local! {
    /// The form on this thread (`None`: the environment's), set by [`with_product_form`].
    static FORM: Cell<Option<ProductForm>> = const { Cell::new(None) };
}

/// The product kernel's form in force on this thread: [`with_product_form`]'s, else the
/// environment's, read once (a value the runner would refuse runs the default here, said on stderr;
/// `xtask` checks the variables before a run).
pub fn product_form() -> ProductForm {
    static ENV: OnceLock<ProductForm> = OnceLock::new();
    if let Some(form) = FORM.with(|f| f.get()) {
        return form;
    }
    *ENV.get_or_init(|| {
        crate::env_switch::or_default(
            product_form_from_env(),
            ProductForm::DEFAULT,
            "fma on, lanes pairs, addresses offsets, stores inline",
        )
    })
}

/// Runs `work` with `form` in force on this thread, whatever the environment says (the
/// product benchmark times both forms of each tile in one process; burn-fusion's product
/// operation runs its kernel in the form in force when it was registered); the form before is
/// restored after.
pub fn with_product_form<T>(form: ProductForm, work: impl FnOnce() -> T) -> T {
    crate::env_switch::with_override(&FORM, form, work)
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

    #[test]
    fn with_product_form_sets_the_form_for_its_work_and_restores_the_one_before() {
        let initial = product_form();
        let rows = ProductForm { paired_lanes: false, ..ProductForm::DEFAULT };
        let mul = ProductForm { fma: false, constant_offsets: false, inline_stores: false, ..ProductForm::DEFAULT };
        let inner = with_product_form(rows, || (product_form(), with_product_form(mul, product_form), product_form()));
        assert_eq!(inner, (rows, mul, rows));
        assert_eq!(product_form(), initial);
        let panicked = std::panic::catch_unwind(|| with_product_form(rows, || panic!("in the work")));
        assert!(panicked.is_err());
        assert_eq!(product_form(), initial, "a panic in the work leaves no override behind");
    }

    #[test]
    fn product_addresses_setting_takes_offsets_sums_and_empty_and_names_the_variable_on_anything_else() {
        assert_eq!(parse_product_addresses(""), Ok(true));
        assert_eq!(parse_product_addresses(" offsets "), Ok(true));
        assert_eq!(parse_product_addresses("sums"), Ok(false));
        for wrong in ["offset", "on", "indices"] {
            let error = parse_product_addresses(wrong).unwrap_err();
            assert!(
                error.contains("ATTEND_GPU_ADDRESSES") && error.contains("sums") && error.contains(wrong),
                "{error}"
            );
        }
    }

    #[test]
    fn product_stores_setting_takes_inline_apart_and_empty_and_names_the_variable_on_anything_else() {
        assert_eq!(parse_product_stores(""), Ok(true));
        assert_eq!(parse_product_stores(" inline "), Ok(true));
        assert_eq!(parse_product_stores("apart"), Ok(false));
        for wrong in ["separate", "on", "block"] {
            let error = parse_product_stores(wrong).unwrap_err();
            assert!(error.contains("ATTEND_GPU_STORES") && error.contains("apart") && error.contains(wrong), "{error}");
        }
    }

    #[test]
    fn product_lanes_setting_takes_pairs_rows_and_empty_and_names_the_variable_on_anything_else() {
        assert_eq!(parse_product_lanes(""), Ok(true));
        assert_eq!(parse_product_lanes(" pairs "), Ok(true));
        assert_eq!(parse_product_lanes("rows"), Ok(false));
        for wrong in ["paired", "on", "columns"] {
            let error = parse_product_lanes(wrong).unwrap_err();
            assert!(error.contains("ATTEND_GPU_LANES") && error.contains("rows") && error.contains(wrong), "{error}");
        }
    }
}
