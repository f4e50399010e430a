#!/usr/bin/env bash
# The GPU measurements of issue #15 in one place, for a machine with a GPU and no Rust: a
# prebuilt runner (`cargo build --release -p xtask --features wgpu` here, or `wgpu,cuda`),
# tiny Shakespeare, and PyTorch for the peer. Each part fits a 10-minute slot; every run
# writes its metrics under $OUT and one JSON line per figure to $OUT/summary.jsonl.
#
#   XTASK=./xtask DATA_DIR=../shared/data PEER=../shared/bench/peers/nanogpt_gpu_bench.py \
#     OUT=/tmp/gpu scripts/gpu_measure.sh kernels|overhead|products|precision|peer|growth|trace|profile|all
#
# - kernels:   nanoGPT's GPU configuration (configs/lm-shakespeare-gpu.toml) on wgpu and
#              wgpu-unfused (and cuda, if the runner has it) with ATTEND_GPU_KERNELS = auto,
#              all, off: tokens/s of the logged intervals after the first $WARM steps.
# - overhead:  `bench train --backend $OVERHEAD_BACKEND` (default wgpu; cuda where the runner has
#              it): the fixed per-step overhead t(1) − (t(8) − t(1))/7 of the default model.
# - products:  `bench products --backend wgpu`: the linear maps' and attention's products of nanoGPT's GPU
#              configuration with CubeCL's kernel and ours (ATTEND_GPU_MATMUL) under each tile (ATTEND_GPU_TILE;
#              TILES, comma-separated, times only those; LANES, FMA, ADDRESSES and STORES, e.g. "pairs,rows",
#              "on,off", "offsets,sums" and "inline,apart", each tile in each such form of its inner loop), ms and TFLOP/s.
#              PRODUCTS_BACKEND=cuda times the same kernels compiled by NVRTC instead (a runner
#              built with cuda): our kernel on both paths tells its design from Vulkan's.
#              Not part of `all`.
# - precision: the same configuration in f16 on wgpu (and bf16 on cuda), against f32.
# - peer:      PyTorch on the same GPU: fp32, tf32, bf16 autocast (nanogpt_gpu_bench.py).
# - peer-products: the products part's peer, PyTorch's (cuBLAS, f32, TF32 off) on the same
#              shapes with the same timing (torch_products.py), and its attention as the peer
#              runs it (scaled_dot_product_attention). Not part of `all`.
# - peer-profile: the profile part's peer, PyTorch's fp32 step under torch.profiler, its
#              kernels' device time a step by kind (torch_step_profile.py). Not part of `all`.
# - growth:    the issue's slow-down: GROWTH_STEPS (default 300) steps at batch 16, logging every
#              step, with each thread's CPU milliseconds per step every 5 s (thread_cpu.py):
#              which thread's work grows with the step number, if any.
# - trace:     burn-fusion's executions, kernels and operations per step (BURN_FUSION_LOG=full,
#              2 and 6 steps, fusion_trace.py), for `auto` and `off`; the same on every machine.
#              Not part of `all` (the log of nanoGPT's model is large): run it on its own.
# - profile:   each kernel's device time per step (CubeCL's profiling logger, 8 steps cut at
#              AdamW's launches, `kernel_profile.py --by-step`) on PROFILE_BACKENDS (default
#              "wgpu"): which kernels the GPU time goes to, and one step's products in order.
#              Not part of `all`.
#
# CONFIG, STEPS (default 60), WARM (default 20), LOG_EVERY (default 10), BACKENDS (default
# "wgpu wgpu-unfused"; add cuda for a runner built with it), KERNELS (default "auto all off") and
# EXTRA (more arguments for every training run, e.g. "--set=train.eval_batches=4") and
# PEER_PRECISIONS (default "fp32 tf32 bf16") override; TAG (gpu_parts.sh sets the runner's name)
# prefixes the tags of the kernels and overhead runs, REPS (default 1) the overhead's repetitions.
set -euo pipefail

part=${1:-all}
: "${XTASK:?path of the prebuilt xtask binary}" "${DATA_DIR:?the data directory}" "${OUT:?where results go}"
CONFIG=${CONFIG:-configs/lm-shakespeare-gpu.toml}
STEPS=${STEPS:-60}
WARM=${WARM:-20}
LOG_EVERY=${LOG_EVERY:-10}
mkdir -p "$OUT"

# The GPU backends to time (add cuda where the runner was built with `--features wgpu,cuda`).
BACKENDS=${BACKENDS:-wgpu wgpu-unfused}

# One training run: $1 backend, $2 tag, the rest extra arguments; appends its figures.
train() {
  local backend=$1 tag=$2
  shift 2
  local run="$OUT/$tag"
  rm -rf "$run"
  local start
  start=$(date +%s)
  if ! "$XTASK" train --config "$CONFIG" --backend "$backend" --data-dir "$DATA_DIR" --run "$run" \
    --set train.max_steps="$STEPS" --set train.eval_every=1000000 --set train.log_every="$LOG_EVERY" ${EXTRA:-} "$@" \
    >"$run.out" 2>"$run.err"; then
    echo "{\"tag\":\"$tag\",\"error\":\"see $run.err\"}" >>"$OUT/summary.jsonl"
    return 0
  fi
  python3 - "$run" "$tag" "$WARM" "$(($(date +%s) - start))" <<'PY' >>"$OUT/summary.jsonl"
import json, statistics, sys
run, tag, warm, wall = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
rows = [json.loads(l) for l in open(f"{run}/metrics.jsonl")]
steps = [r for r in rows if r.get("event") == "train"]
rates = [r["tokens_per_s"] for r in steps if r["step"] > warm]
startup = [l.strip() for l in open(f"{run}.out") if l.startswith("start-up")]
print(json.dumps({"tag": tag, "tokens_per_s_median": statistics.median(rates) if rates else None,
                  "intervals": len(rates), "last_loss": steps[-1]["loss"] if steps else None,
                  "wall_s": wall, "start_up": startup[0] if startup else None}))
PY
}

if [[ $part == kernels || $part == all ]]; then
  for backend in $BACKENDS; do
    for kernels in ${KERNELS:-auto all off}; do
      ATTEND_GPU_KERNELS=$kernels train "$backend" "${TAG:+$TAG-}$backend-$kernels"
    done
  done
fi

if [[ $part == overhead || $part == all ]]; then
  "$XTASK" bench train --backend "${OVERHEAD_BACKEND:-wgpu}" --reps "${REPS:-1}" --no-peers 2>"$OUT/${TAG:+$TAG-}overhead.err" |
    sed "s/^{/{\"tag\":\"${TAG:+$TAG-}overhead\",/" | tee -a "$OUT/summary.jsonl"
fi

if [[ $part == products ]]; then
  "$XTASK" bench products --backend "${PRODUCTS_BACKEND:-wgpu}" --reps "${REPS:-1}" ${TILES:+--tiles "$TILES"} ${LANES:+--lanes "$LANES"} ${FMA:+--fma "$FMA"} ${ADDRESSES:+--addresses "$ADDRESSES"} ${STORES:+--stores "$STORES"} 2>"$OUT/${TAG:+$TAG-}products.err" |
    sed "s/^{/{\"tag\":\"${TAG:+$TAG-}products\",/" | tee -a "$OUT/summary.jsonl"
fi

if [[ $part == precision || $part == all ]]; then
  train wgpu wgpu-f32
  train wgpu wgpu-f16 --set train.precision=f16
  if [[ $BACKENDS == *cuda* ]]; then
    train cuda cuda-bf16 --set train.precision=bf16
  fi
fi

here=$(cd "$(dirname "$0")" && pwd)

if [[ $part == growth || $part == all ]]; then
  run="$OUT/growth"
  rm -rf "$run"
  python3 "$here/thread_cpu.py" --run "$run" --every 5 --out "$OUT/growth.jsonl" -- \
    "$XTASK" train --config "$CONFIG" --backend wgpu --data-dir "$DATA_DIR" --run "$run" \
    --set train.batch_size=16 --set train.max_steps="${GROWTH_STEPS:-300}" --set train.eval_every=1000000 \
    --set train.checkpoint_every=1000000 --set train.log_every=1 >"$OUT/growth.out" 2>"$OUT/growth.err" || true
  python3 - "$OUT/growth.jsonl" <<'PY' | tee -a "$OUT/summary.jsonl"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print(json.dumps({"tag": "growth", "windows": [{"step": r["step"], "ms_per_step": round(r["wall_ms_per_step"], 1),
      "cpu_ms_per_step": {k: round(v, 1) for k, v in r["cpu_ms_per_step"].items()}} for r in rows]}))
PY
fi

if [[ $part == trace ]]; then
  for kernels in auto off; do
    for steps in 2 6; do
      ATTEND_GPU_KERNELS=$kernels BURN_FUSION_LOG=full "$XTASK" train --config "$CONFIG" --backend wgpu \
        --data-dir "$DATA_DIR" --run "$OUT/trace-$kernels-$steps" --set train.max_steps=$steps \
        --set train.eval_every=1000000 --set train.checkpoint_every=1000000 --set train.eval_batches=1 \
        >/dev/null 2>"$OUT/trace-$kernels-$steps.err" || true
      rm -rf "$OUT/trace-$kernels-$steps"
    done
    python3 "$here/fusion_trace.py" "$OUT/trace-$kernels-2.err:2" "$OUT/trace-$kernels-6.err:6" |
      python3 -c "import json,sys; print(json.dumps({'tag': 'trace-$kernels', **json.load(sys.stdin)}))" |
      tee -a "$OUT/summary.jsonl"
    rm -f "$OUT/trace-$kernels-2.err" "$OUT/trace-$kernels-6.err"
  done
fi

if [[ $part == profile ]]; then
  for backend in ${PROFILE_BACKENDS:-wgpu}; do
    log="$OUT/${TAG:+$TAG-}profile-$backend.log"
    CUBECL_DEBUG_LOG="$log" CUBECL_DEBUG_OPTION=profile "$XTASK" train --config "$CONFIG" \
      --backend "$backend" --data-dir "$DATA_DIR" --run "$OUT/profile-$backend" --set train.max_steps=8 \
      --set train.eval_every=1000000 --set train.checkpoint_every=1000000 --set train.eval_batches=1 ${EXTRA:-} \
      >/dev/null 2>"$OUT/${TAG:+$TAG-}profile-$backend.err" || true
    rm -rf "$OUT/profile-$backend"
    python3 "$here/kernel_profile.py" --by-step "$log" |
      python3 -c "import json,sys; print(json.dumps({'tag': '${TAG:+$TAG-}profile-$backend', **json.load(sys.stdin)}))" |
      tee -a "$OUT/summary.jsonl"
    rm -f "$log"
  done
fi

if [[ $part == peer || $part == all ]]; then
  : "${PEER:?path of nanogpt_gpu_bench.py}"
  for precision in ${PEER_PRECISIONS:-fp32 tf32 bf16}; do
    python3 "$PEER" --data "$DATA_DIR/tinyshakespeare/input.txt" --iters 200 --precision "$precision" \
      2>>"$OUT/peer.err" | python3 -c "import json,sys; [print(json.dumps({'tag':'pytorch-$precision', **json.loads(l)})) for l in sys.stdin if l.startswith('{')]" \
      | tee -a "$OUT/summary.jsonl"
  done
fi

if [[ $part == peer-products ]]; then
  python3 "$here/torch_products.py" --reps "$((${REPS:-1} * 10))" 2>>"$OUT/peer-products.err" |
    sed 's/^{/{"tag":"pytorch-products",/' | tee -a "$OUT/summary.jsonl"
fi

if [[ $part == peer-profile ]]; then
  : "${PEER:?path of nanogpt_gpu_bench.py}"
  python3 "$here/torch_step_profile.py" --peer "$PEER" --data "$DATA_DIR/tinyshakespeare/input.txt" \
    --precision "${PEER_PRECISION:-fp32}" 2>>"$OUT/peer-profile.err" | grep '^{"tag"' | tee -a "$OUT/summary.jsonl"
fi
