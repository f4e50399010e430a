//! The tile our GPU product kernel (`fused/cube/product.rs`) gives each cube, by the
//! environment variable `ATTEND_GPU_TILE`: `auto` (the default), or `ROWSxCOLSxDEPTH` for
//! every product: the rows and columns of `C` a cube computes (64 or 128 each) and the step
//! along `k` (8 or 16). Every unit keeps an 8 × 8 block of `C` in registers, so a 128 × 128
//! tile takes 256 units, 128 × 64 and 64 × 128 take 128, 64 × 64 takes 64; a name ending in
//! `w` (`128x128x8w`: a wide tile, 128 columns only) gives each unit an 8 × 16 block, half
//! as many units.
//!
//! `auto` (the default) chooses by the product's shape, as `bench products` timed every tile
//! on an H200 (docs/benchmarks.md, "Product tiles on the H200"):
//! - at most 64 columns: `128x64x8` ([`ProductTile::NARROW`]). Attention's context product
//!   `P·V` and three of its gradients (`[256 × 256]·[256 × 64]` a head in nanoGPT's GPU
//!   configuration) fill half of a 128-wide tile, half the multiply-adds of zeros: 0.44-0.66
//!   ms with it against 0.85-1.18 with `128x128x8`.
//! - a sum over at most 64 (attention's scores `Q·Kᵀ` and `dP = dC·Vᵀ`, a head's 64 wide):
//!   `128x128x8` ([`ProductTile::DEFAULT`]), 0.77 and 0.82 ms against 0.82 for `64x128x8`.
//! - the rest (the linear maps, their input gradients, their weight gradients' row slices):
//!   `64x128x8` ([`ProductTile::HALF_ROWS`]): faster in 11 of the 12 products of nanoGPT's
//!   linear maps (1.9x for the second MLP map's weight gradient; 8% slower for the output
//!   map's, 65 columns); nanoGPT's GPU configuration trained at 1.088x the tokens/s it had
//!   with `128x128x8` for these, the same losses.
//!
//! The other tiles are there to be timed against these on a GPU (`cargo xtask bench products`
//! times every tile): a deeper step halves the synchronizations of a long `k`, a smaller tile
//! gives a small product more cubes, a wide one reads shared memory a quarter less often for
//! each multiply-add, with twice the accumulators a unit.

use std::cell::Cell;
use std::sync::OnceLock;

/// A cube's tile of `C` and its step along `k`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ProductTile {
    /// Rows of `C` per cube: 64 or 128.
    pub rows: usize,
    /// Columns of `C` per cube: 64 or 128.
    pub cols: usize,
    /// Elements of `k` per step: 8 or 16.
    pub depth: usize,
    /// Columns of `C` per unit: 8, or 16 for the wide tiles (whose `cols` is 128).
    pub unit_cols: usize,
}

impl ProductTile {
    /// `128x128x8`: the kernel's first tile, `auto`'s for products of more than 64 columns
    /// summed over at most 64.
    pub const DEFAULT: ProductTile = ProductTile::of(128, 128, 8);

    /// `128x64x8`: `auto`'s for products of at most 64 columns.
    pub const NARROW: ProductTile = ProductTile::of(128, 64, 8);

    /// `64x128x8`: `auto`'s for products of more than 64 columns summed over more than 64.
    pub const HALF_ROWS: ProductTile = ProductTile::of(64, 128, 8);

    /// Every tile the kernel takes, the default first.
    pub const ALL: [ProductTile; 12] = [
        ProductTile::DEFAULT,
        ProductTile::of(128, 128, 16),
        ProductTile::NARROW,
        ProductTile::of(128, 64, 16),
        ProductTile::HALF_ROWS,
        ProductTile::of(64, 128, 16),
        ProductTile::of(64, 64, 8),
        ProductTile::of(64, 64, 16),
        ProductTile::of(128, 128, 8).wide(),
        ProductTile::of(128, 128, 16).wide(),
        ProductTile::of(64, 128, 8).wide(),
        ProductTile::of(64, 128, 16).wide(),
    ];

    /// The tile of `rows` × `cols` walking `k` `depth` at a time, an 8 × 8 block a unit.
    pub const fn of(rows: usize, cols: usize, depth: usize) -> ProductTile {
        ProductTile { rows, cols, depth, unit_cols: 8 }
    }

    /// The same tile with an 8 × 16 block a unit.
    pub const fn wide(self) -> ProductTile {
        ProductTile { unit_cols: 16, ..self }
    }

    /// Units per cube: one per block of 8 rows and `unit_cols` columns of the tile.
    pub fn units(self) -> usize {
        self.rows * self.cols / (8 * self.unit_cols)
    }

    /// Bytes of shared memory a cube stages its operands in: two stages of `depth` rows of
    /// each operand's side, in vectors of four `f32` (8-deep steps pad each row by one vector;
    /// 16-deep ones permute instead, so that every tile fits 32 KB).
    pub fn shared_bytes(self) -> usize {
        let pad = if self.depth == 8 { 1 } else { 0 };
        2 * self.depth * (self.rows / 4 + pad + self.cols / 4 + pad) * 16
    }

    /// Its spelling in `ATTEND_GPU_TILE` and in the benchmark's output, `ROWSxCOLSxDEPTH`,
    /// with a `w` after it for a wide tile.
    pub fn name(self) -> String {
        let wide = if self.unit_cols == 16 { "w" } else { "" };
        format!("{}x{}x{}{wide}", self.rows, self.cols, self.depth)
    }
}

/// The setting of `ATTEND_GPU_TILE`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TileChoice {
    /// `auto` (the default): [`ProductTile::NARROW`] for products of at most 64 columns,
    /// [`ProductTile::DEFAULT`] for wider ones summed over at most 64, [`ProductTile::HALF_ROWS`]
    /// for the others.
    Auto,
    /// One tile for every product.
    Fixed(ProductTile),
}

impl TileChoice {
    /// The tile a product of `cols` columns, each a sum over `depth` (its `k`), takes.
    pub fn for_product(self, cols: usize, depth: usize) -> ProductTile {
        match self {
            TileChoice::Fixed(tile) => tile,
            TileChoice::Auto if cols <= 64 => ProductTile::NARROW,
            TileChoice::Auto if depth <= 64 => ProductTile::DEFAULT,
            TileChoice::Auto => ProductTile::HALF_ROWS,
        }
    }

    /// Its spelling in `ATTEND_GPU_TILE` and in the benchmark's output.
    pub fn name(self) -> String {
        match self {
            TileChoice::Auto => "auto".to_string(),
            TileChoice::Fixed(tile) => tile.name(),
        }
    }
}

/// The values `ATTEND_GPU_TILE` takes, for its errors.
fn expected() -> String {
    let names: Vec<String> = ProductTile::ALL.iter().map(|t| t.name()).collect();
    format!("auto (the default) or one of {}", names.join(", "))
}

/// A value of `ATTEND_GPU_TILE`: `auto` (or empty), or one of [`ProductTile::ALL`]'s names;
/// anything else is an error that names the variable and the values it takes.
pub fn parse_product_tile(value: &str) -> Result<TileChoice, String> {
    let value = value.trim();
    if value.is_empty() || value == "auto" {
        return Ok(TileChoice::Auto);
    }
    ProductTile::ALL
        .into_iter()
        .find(|t| t.name() == value)
        .map(TileChoice::Fixed)
        .ok_or_else(|| format!("ATTEND_GPU_TILE = {value:?}: expected {}", expected()))
}

/// `ATTEND_GPU_TILE` read: unset, or a value [`parse_product_tile`] takes.
pub fn product_tile_from_env() -> Result<TileChoice, String> {
    crate::env_switch::read("ATTEND_GPU_TILE", TileChoice::Auto, &expected(), parse_product_tile)
}

thread_local! {
    /// The choice on this thread (`None`: the environment's), set by [`with_product_tile`].
    static CHOICE: Cell<Option<TileChoice>> = const { Cell::new(None) };
}

/// The choice in force on this thread: [`with_product_tile`]'s, else the environment's, read
/// once (a value the runner would refuse runs `auto` here, said on stderr; `xtask` checks it before a
/// run).
pub fn product_tile() -> TileChoice {
    static ENV: OnceLock<TileChoice> = OnceLock::new();
    if let Some(choice) = CHOICE.with(|t| t.get()) {
        return choice;
    }
    *ENV.get_or_init(|| crate::env_switch::or_default(product_tile_from_env(), TileChoice::Auto, "auto"))
}

/// Runs `work` with `choice` in force on this thread, whatever `ATTEND_GPU_TILE` says (the
/// product benchmark times every tile in one process; burn-fusion's product operation runs
/// its kernel under the choice in force when it was registered); the setting before is
/// restored after.
pub fn with_product_tile<T>(choice: TileChoice, work: impl FnOnce() -> T) -> T {
    crate::env_switch::with_override(&CHOICE, choice, work)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn product_tile_setting_takes_auto_and_every_tile_by_name_and_names_the_variable_on_anything_else() {
        assert_eq!(parse_product_tile(""), Ok(TileChoice::Auto));
        assert_eq!(parse_product_tile("auto"), Ok(TileChoice::Auto));
        for tile in ProductTile::ALL {
            assert_eq!(parse_product_tile(&format!(" {} ", tile.name())), Ok(TileChoice::Fixed(tile)));
        }
        assert_eq!(ProductTile::DEFAULT.name(), "128x128x8");
        assert_eq!(parse_product_tile("64x128x16w"), Ok(TileChoice::Fixed(ProductTile::of(64, 128, 16).wide())));
        for wrong in ["128x128", "32x32x8", "128x128x4", "128x64x8w", "big"] {
            let error = parse_product_tile(wrong).unwrap_err();
            assert!(
                error.contains("ATTEND_GPU_TILE") && error.contains("128x64x16") && error.contains(wrong),
                "{error}"
            );
        }
    }

    #[test]
    fn with_product_tile_sets_the_choice_for_its_work_and_restores_the_one_before() {
        let initial = product_tile();
        let (narrow, deep) = (TileChoice::Fixed(ProductTile::NARROW), TileChoice::Auto);
        let inner =
            with_product_tile(narrow, || (product_tile(), with_product_tile(deep, product_tile), product_tile()));
        assert_eq!(inner, (narrow, deep, narrow));
        assert_eq!(product_tile(), initial);
        let panicked = std::panic::catch_unwind(|| with_product_tile(narrow, || panic!("in the work")));
        assert!(panicked.is_err());
        assert_eq!(product_tile(), initial, "a panic in the work leaves no override behind");
    }

    #[test]
    fn auto_takes_narrow_for_64_columns_default_for_short_sums_half_rows_else_and_fixed_everywhere() {
        assert_eq!(TileChoice::Auto.for_product(64, 256), ProductTile::NARROW);
        assert_eq!(TileChoice::Auto.for_product(1, 16384), ProductTile::NARROW);
        assert_eq!(TileChoice::Auto.for_product(256, 64), ProductTile::DEFAULT);
        assert_eq!(TileChoice::Auto.for_product(65, 1), ProductTile::DEFAULT);
        assert_eq!(TileChoice::Auto.for_product(65, 65), ProductTile::HALF_ROWS);
        assert_eq!(TileChoice::Auto.for_product(1536, 384), ProductTile::HALF_ROWS);
        let deep = ProductTile::ALL[1];
        assert_eq!(TileChoice::Fixed(deep).for_product(64, 64), deep);
        assert_eq!(TileChoice::Fixed(deep).for_product(1152, 384), deep);
    }

    #[test]
    fn every_tile_has_whole_warps_whole_loads_and_fits_32_kb_of_shared_memory() {
        for t in ProductTile::ALL {
            // Warps of 4 × 8 units (`ty` × `tx`), whole along both sides; each unit loads
            // whole vectors of four of both operands.
            assert_eq!(t.units() % 32, 0, "{t:?}");
            assert!(t.unit_cols == 8 || t.unit_cols == 16, "{t:?}");
            assert_eq!((t.cols / t.unit_cols) % 8, 0, "{t:?}");
            assert_eq!((t.rows / 8) % 4, 0, "{t:?}");
            assert_eq!((t.depth * t.rows / 4) % t.units(), 0, "{t:?}");
            assert_eq!((t.depth * t.cols / 4) % t.units(), 0, "{t:?}");
            // lavapipe's limit; NVIDIA's Vulkan drivers give 48 KB.
            assert!(t.shared_bytes() <= 32 * 1024, "{t:?}: {} bytes", t.shared_bytes());
        }
    }
}
