#!/usr/bin/env bash
# Our product kernel's SASS for an H100/H200 (sm_90a), read offline with no GPU: CubeCL's CUDA
# compiler writes the kernel's CUDA C++ on the host (attend-model's `kernel-source` example;
# lavapipe defines the kernel), NVRTC compiles it as burn-cuda would, nvdisasm prints the
# machine code, and sass_loops.py counts the instructions of its loop along `k`.
#
#   scripts/product_sass.sh TILE LAYOUT [FMA] [LANES] [ADDRESSES] [TRIANGLE]
#     e.g. 64x128x8 forward on pairs offsets full
#
# LAYOUT: forward (x·W), dx (dy·Wᵀ) or dw (xᵀ·dy), whole tiles, or with -ragged after it; TRIANGLE: full, output (tril(A·B), attention's
# scores), lower-a (tril(A)·B, its context) or upper-a (triu(A)·B, dV). Output in .sass/ (ignored by git):
# NAME.cu, NAME.cubin, NAME.sass, and on stdout the registers, spills and the loop's counts.
# NVIDIA's tools come from PyPI wheels (NVRTC, the runtime's and CCCL's headers, nvdisasm,
# cuobjdump), unpacked once into $CUDA_WHEELS (default ~/.cache/attend-cuda/nvidia); nothing
# is installed system-wide and nothing of them becomes a dependency of the product.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 2 ] || { sed -n 2,15p "$0"; exit 2; }
tile=$1 layout=$2 fma=${3:-on} lanes=${4:-pairs} addresses=${5:-offsets} triangle=${6:-full}
arch=${ARCH:-sm_90a}
# Mesa's lavapipe, which defines the kernel, complains where this is unset.
export XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-/tmp}
export CUDA_WHEELS=${CUDA_WHEELS:-$HOME/.cache/attend-cuda/nvidia}
if [ ! -x "$CUDA_WHEELS/cu13/bin/nvdisasm" ] || [ ! -e "$CUDA_WHEELS/cuda_nvrtc/lib/libnvrtc.so.12" ]; then
  echo "fetching NVIDIA's NVRTC, headers and disassembler (PyPI wheels) into $CUDA_WHEELS" >&2
  wheels=$(mktemp -d)
  python3 -m pip download --quiet --no-deps -d "$wheels" nvidia-cuda-nvrtc-cu12 nvidia-cuda-runtime-cu12 \
    nvidia-cuda-cccl-cu12 nvidia-cuda-nvdisasm nvidia-cuda-cuobjdump
  mkdir -p "$(dirname "$CUDA_WHEELS")"
  for w in "$wheels"/*.whl; do python3 -m zipfile -e "$w" "$(dirname "$CUDA_WHEELS")"; done
  chmod +x "$CUDA_WHEELS"/cu13/bin/*
  rm -rf "$wheels"
fi
name="product-$tile-$layout-fma$fma-$lanes-$addresses-$triangle-$arch"
mkdir -p .sass
cargo run --quiet --release -p attend-model --features kernel-source --example product_source \
  --config profile.release.package.attend-model.opt-level=0 -- "$tile" "$layout" "$fma" "$lanes" "$addresses" "$triangle" > ".sass/$name.cu"
python3 scripts/nvrtc_cubin.py ".sass/$name.cu" ".sass/$name.cubin" "$arch"
"$CUDA_WHEELS/cu13/bin/cuobjdump" --dump-resource-usage ".sass/$name.cubin" | grep -E "REG|Function" | sed 's/^ *//'
"$CUDA_WHEELS/cu13/bin/nvdisasm" -c ".sass/$name.cubin" 2>/dev/null > ".sass/$name.sass"
python3 scripts/sass_loops.py ".sass/$name.sass" --top "${TOP:-2}"
