//! Prints the CUDA C++ of our product kernel, compiled on the host by CubeCL's CUDA compiler
//! (no GPU; a Vulkan driver such as lavapipe defines the kernel): `cargo run --release -p
//! attend-model --features kernel-source --example product_source -- TILE LAYOUT [FMA LANES
//! ADDRESSES TRIANGLE STORES]`, e.g. `64x128x8 forward on pairs offsets full inline`; TRIANGLE is `full`,
//! `output` (`tril(A·B)`: attention's scores), `lower-a` (`tril(A)·B`: its context) or
//! `upper-a` (`triu(A)·B`: `dV`); STORES is `inline` or `apart` (`ATTEND_GPU_STORES`). `scripts/product_sass.sh` compiles it to SASS.

use attend_model::fused::{
    parse_product_addresses, parse_product_fma, parse_product_lanes, parse_product_stores, parse_product_tile,
    product_cuda_source, ProductForm, ProductLayout, TileChoice, Triangle,
};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if !(2..=7).contains(&args.len()) {
        eprintln!(
            "usage: product_source TILE forward|dx|dw[-ragged] [on|off] [pairs|rows] [offsets|sums] [full|output|lower-a|upper-a] [inline|apart]"
        );
        std::process::exit(2);
    }
    let fail = |message: String| -> ! {
        eprintln!("product_source: {message}");
        std::process::exit(2)
    };
    let tile = match parse_product_tile(&args[0]).unwrap_or_else(|e| fail(e)) {
        TileChoice::Fixed(tile) => tile,
        TileChoice::Auto => fail("name a tile, not `auto`".into()),
    };
    let layout = ProductLayout::parse(&args[1]).unwrap_or_else(|e| fail(e));
    let mut form = ProductForm::DEFAULT;
    if let Some(fma) = args.get(2) {
        form.fma = parse_product_fma(fma).unwrap_or_else(|e| fail(e));
    }
    if let Some(lanes) = args.get(3) {
        form.paired_lanes = parse_product_lanes(lanes).unwrap_or_else(|e| fail(e));
    }
    if let Some(addresses) = args.get(4) {
        form.constant_offsets = parse_product_addresses(addresses).unwrap_or_else(|e| fail(e));
    }
    let triangle = match args.get(5).map(String::as_str) {
        None | Some("full") => Triangle::Full,
        Some("output") => Triangle::Output(0),
        Some("lower-a") => Triangle::LowerA(0),
        Some("upper-a") => Triangle::UpperA(0),
        Some(other) => fail(format!("unknown triangle `{other}`: expected full, output, lower-a or upper-a")),
    };
    if let Some(stores) = args.get(6) {
        form.inline_stores = parse_product_stores(stores).unwrap_or_else(|e| fail(e));
    }
    print!("{}", product_cuda_source(tile, form, layout, triangle));
}
