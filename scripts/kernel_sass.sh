#!/usr/bin/env bash
# A kernel's SASS for an H100/H200 (sm_90a), read offline with no GPU: one of attend-model's
# `kernel-source` examples writes the kernel's CUDA C++ as CubeCL's CUDA compiler does (lavapipe
# defines the kernel), NVRTC compiles it as burn-cuda would, nvdisasm prints the machine code,
# and sass_loops.py counts its instructions (its loops' and, with --whole in SASS_COUNT, all).
#
#   scripts/kernel_sass.sh EXAMPLE NAME [ARGS...]
#     e.g. scripts/kernel_sass.sh row_source weights-forward-256-checked forward 256 checked
#
# EXAMPLE is the example (product_source, row_source), NAME the output's name in .sass/ (ignored
# by git: NAME.cu, NAME.cubin, NAME.sass), ARGS the example's. On stdout: registers, spills
# and the counts. NVIDIA's tools come from PyPI wheels (NVRTC, the runtime's and CCCL's
# headers, nvdisasm, cuobjdump), unpacked once into $CUDA_WHEELS (default
# ~/.cache/attend-cuda/nvidia); nothing is installed system-wide and nothing of them becomes a
# dependency of the product. scripts/product_sass.sh names the product kernel's cases.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 2 ] || { sed -n 2,15p "$0"; exit 2; }
example=$1 name=$2
shift 2
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
name="$name-$arch"
mkdir -p .sass
cargo run --quiet --release -p attend-model --features kernel-source --example "$example" \
  --config profile.release.package.attend-model.opt-level=0 -- "$@" > ".sass/$name.cu"
python3 scripts/nvrtc_cubin.py ".sass/$name.cu" ".sass/$name.cubin" "$arch"
"$CUDA_WHEELS/cu13/bin/cuobjdump" --dump-resource-usage ".sass/$name.cubin" | grep -E "REG|Function" | sed 's/^ *//'
"$CUDA_WHEELS/cu13/bin/nvdisasm" -c ".sass/$name.cubin" 2>/dev/null > ".sass/$name.sass"
# shellcheck disable=SC2086
python3 scripts/sass_loops.py ".sass/$name.sass" --top "${TOP:-2}" ${SASS_COUNT:-}
