#!/usr/bin/env bash
# Runs several parts of scripts/gpu_measure.sh in one go on a GPU machine with no Rust, each
# under its own timeout, skipping a part that would end past LIMIT seconds (default 570: one
# ten-minute slot), and leaves the small results in $OUT: summary.jsonl and lite.tgz (every
# run's .out/.err and metrics.jsonl, nvidia-smi's utilization each second; no checkpoints).
#
#   scripts/gpu_parts.sh RUNNER PART:TIMEOUT ...
#
# RUNNER is a prebuilt `xtask` (stripped; RUNNER.xz is unpacked to /tmp first), looked up in
# $GPU_DIR (default .gpu, with data/tinyshakespeare/input.txt and nanogpt_gpu_bench.py beside
# it). A PART is a gpu_measure.sh part and its settings, joined by '+', e.g.
#   kernels+BACKENDS=wgpu+KERNELS=auto+STEPS=100:300   peer:200   growth+GROWTH_STEPS=200:150
# A part's RUNNER=NAME runs it with another runner of $GPU_DIR instead (and tags it NAME unless
# the part sets TAG after it), so that two builds alternate in one call.
# Where $GPU_DIR/../.gl holds Debian packages of the Vulkan loader and GLVND (gpu_prepare.sh
# downloads them), they are unpacked into / first, and the NVIDIA driver's Vulkan ICD and EGL
# vendor file are named when present: with the loader alone an H200 found no adapter.
# Kernel caches go to $ATTEND_CACHE_DIR (default /tmp/attend-cache), so a later call on the
# same machine starts warm. EXTRA (arguments for every training run) defaults to a short final
# evaluation and no checkpoints; a part that sets EXTRA replaces that default for itself
# (its value is one word: write `--set=key=value`).
set -u
T0=$(date +%s)
LIMIT=${LIMIT:-570}
GPU_DIR=${GPU_DIR:-.gpu}
: "${OUT:?where results go}"
here=$(cd "$(dirname "$0")" && pwd)
if [ -d "$GPU_DIR/../.gl" ]; then
  for f in "$GPU_DIR"/../.gl/*.deb; do dpkg -x "$f" /; done
  ldconfig
fi
icd=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
[ -f "$icd" ] && export VK_DRIVER_FILES=$icd
egl=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
[ -f "$egl" ] && export __EGL_VENDOR_LIBRARY_FILENAMES=$egl
runner=$1
shift
# Unpacks runner $1 to /tmp once.
unpack() {
  if [ ! -x "/tmp/$1" ]; then
    python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],'wb'))" \
      "$GPU_DIR/$1.xz" "/tmp/$1" && chmod +x "/tmp/$1"
  fi
}
unpack "$runner"
export TAG=${TAG:-$runner} XTASK=/tmp/$runner DATA_DIR=$PWD/$GPU_DIR/data PEER=$PWD/$GPU_DIR/nanogpt_gpu_bench.py
export ATTEND_CACHE_DIR=${ATTEND_CACHE_DIR:-/tmp/attend-cache} PYTHONUNBUFFERED=1
export EXTRA=${EXTRA:---set=train.eval_batches=4 --set=train.checkpoint_every=1000000}
W=/tmp/gpu-parts
mkdir -p $W
echo "== $(date -u +%T) runner $runner, Vulkan ICD ${VK_DRIVER_FILES:-default}, kernel cache $(du -sh "$ATTEND_CACHE_DIR" 2>/dev/null | cut -f1)"
nvidia-smi --query-gpu=name,driver_version,memory.used,utilization.gpu,clocks.sm --format=csv
nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader -l 1 >"$W/smi-$runner-$T0.csv" 2>/dev/null &
smi=$!
for spec in "$@"; do
  part=${spec%:*}
  limit=${spec##*:}
  now=$(($(date +%s) - T0))
  if ((now + limit > LIMIT)); then
    echo "== skip '$part' (at ${now} s, needs $limit)"
    continue
  fi
  echo "== $(date -u +%T) +${now} s: $part (timeout $limit s)"
  IFS=+ read -r -a words <<<"$part"
  # A part's RUNNER=NAME runs that part with another packed runner (its TAG by default).
  own=()
  for w in "${words[@]:1}"; do
    if [[ $w == RUNNER=* ]]; then
      unpack "${w#RUNNER=}"
      own=(XTASK="/tmp/${w#RUNNER=}" TAG="${w#RUNNER=}")
    fi
  done
  env OUT=$W "${own[@]}" "${words[@]:1}" timeout "$limit" "$here/gpu_measure.sh" "${words[0]}"
  echo "== exit $? after $(($(date +%s) - T0)) s"
  tail -n 1 "$W/summary.jsonl" 2>/dev/null | cut -c1-600
done
kill $smi 2>/dev/null
cp "$W/summary.jsonl" "$OUT/" 2>/dev/null
(cd $W && tar czf "$OUT/lite.tgz" $(find . -maxdepth 1 \( -name '*.out' -o -name '*.err' -o -name '*.csv' \) -o -maxdepth 2 -name metrics.jsonl))
echo "== done after $(($(date +%s) - T0)) s"
