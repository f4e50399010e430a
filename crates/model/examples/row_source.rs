//! Prints the CUDA C++ of attention's weights kernels, compiled on the host by CubeCL's CUDA
//! compiler (no GPU; a Vulkan driver such as lavapipe defines the kernel): `cargo run --release
//! -p attend-model --features kernel-source --example row_source -- forward|backward KEYS
//! checked|unchecked`, e.g. `forward 256 checked` (nanoGPT's rows, as `launch` compiles them).
//! `scripts/kernel_sass.sh` compiles it to SASS.

use attend_model::fused::attention_weights_cuda_source;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let fail = |message: &str| -> ! {
        eprintln!("row_source: {message}");
        eprintln!("usage: row_source forward|backward KEYS checked|unchecked");
        std::process::exit(2)
    };
    if args.len() != 3 {
        fail("three arguments expected");
    }
    let forward = match args[0].as_str() {
        "forward" => true,
        "backward" => false,
        _ => fail(&format!("unknown direction `{}`: expected forward or backward", args[0])),
    };
    let keys: usize = match args[1].parse() {
        Ok(keys) if keys > 0 && keys % 4 == 0 && keys <= 2048 => keys,
        _ => fail(&format!("KEYS `{}`: expected a multiple of 4 from 4 to 2048", args[1])),
    };
    let checked = match args[2].as_str() {
        "checked" => true,
        "unchecked" => false,
        _ => fail(&format!("unknown mode `{}`: expected checked or unchecked", args[2])),
    };
    print!("{}", attention_weights_cuda_source(forward, keys, checked));
}
