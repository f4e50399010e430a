#!/usr/bin/env bash
# Prepares, on this machine (with Rust and ../shared), what one call of the device tool needs to
# run scripts/gpu_parts.sh on a GPU machine with no Rust: a stripped, xz-packed runner, tiny
# Shakespeare and the PyTorch peer in .gpu/, the Debian packages of the Vulkan loader and of
# GLVND in .gl/ (the device README's list: with the loader alone an H200 found no adapter, with
# these it did), both folders in .git/info/exclude. It ends by printing the call to make
# (docs/benchmarks.md has the figures earlier calls took; the device README the loader's steps).
#
#   scripts/gpu_prepare.sh [RUNNER] [FEATURES]
#
# RUNNER names the packed runner (default xtask-gpu; a new name per build, so that a figure in
# the docs names the build that made it), FEATURES xtask's features (default wgpu,cuda).
# SHARED (default ../shared) is where the data and the peer are read; CARGO_TARGET_DIR is
# honoured, so that a second build (e.g. `wgpu-exclusive-memory`) keeps its own folder.
set -euo pipefail
cd "$(dirname "$0")/.."
runner=${1:-xtask-gpu}
features=${2:-wgpu,cuda}
shared=${SHARED:-../shared}
text=$shared/data/tinyshakespeare/input.txt
peer=$shared/bench/peers/nanogpt_gpu_bench.py
for f in "$text" "$peer"; do
  [ -f "$f" ] || { echo "gpu_prepare: $f is missing (set SHARED to the folder holding data/ and bench/)" >&2; exit 1; }
done

exclude=.git/info/exclude
mkdir -p .git/info
for d in /.gpu/ /.gl/; do
  grep -qxF "$d" "$exclude" 2>/dev/null || echo "$d" >>"$exclude"
done

cargo build --release -p xtask --features "$features"
mkdir -p .gpu/data/tinyshakespeare
strip -o ".gpu/$runner" "${CARGO_TARGET_DIR:-target}/release/xtask"
xz -9 -T0 -f ".gpu/$runner"
install -m 0644 "$text" .gpu/data/tinyshakespeare/input.txt
install -m 0644 "$peer" .gpu/nanogpt_gpu_bench.py

loaders=(libvulkan1 libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2)
missing=()
for p in "${loaders[@]}"; do
  ls .gl/"${p}"_*.deb >/dev/null 2>&1 || missing+=("$p")
done
if ((${#missing[@]})); then
  mkdir -p .gl /tmp/amd64/partial
  apt_amd64=(-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=/tmp/amd64)
  apt-get "${apt_amd64[@]}" update >/dev/null
  (cd .gl && apt-get "${apt_amd64[@]}" download "${missing[@]}")
fi

# The device tool carries at most 64 MiB of ignored paths in all.
size=$(du -cb .gpu .gl | tail -n 1 | cut -f1)
echo "gpu_prepare: .gpu and .gl hold $((size / 1024 / 1024)) MiB (the device tool carries at most 64)"
if ((size > 64 * 1024 * 1024)); then
  echo "gpu_prepare: too large to carry; remove older runners from .gpu" >&2
  exit 1
fi
echo "gpu_prepare: the call (run, carry [\".gpu\", \".gl\"], timeout_s 600), for example:"
echo "  scripts/gpu_parts.sh $runner kernels+BACKENDS=wgpu+KERNELS=auto+STEPS=100:150 peer:150"
