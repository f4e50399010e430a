#!/bin/sh
# Fuzzes the given targets (default: all eight) in turn for SECONDS of wall time each:
#   sh fuzz/run.sh SECONDS [TARGET ...]        (from the repository root)
# Two lanes on two cores: `sh fuzz/run.sh 480 checkpoint corpus pairs config &` and
# `sh fuzz/run.sh 480 tokenizer_json metrics_log bleu_chrf state_json`.
# Builds with the stable toolchain (RUSTC_BOOTSTRAP=1 lets cargo fuzz pass its -Z flags),
# without a sanitizer: libFuzzer still catches panics, aborts, segfaults, inputs slower than
# 10 s and single allocations over 2 GB (-malloc_limit_mb). The process's total RSS limit is
# 2 GB, except for `checkpoint`: creating a model on Burn's autodiff backend and dropping it
# without a backward leaks its graph nodes (about 20 KB per model here; Burn issues #3976 and
# #4970), so that target's RSS grows with executions and gets 8 GB. A crash is written to
# fuzz/artifacts/TARGET/ and ends that target. Each target's CPU seconds are printed.
set -u
seconds=$1
shift
targets=${*:-tokenizer_json checkpoint config metrics_log corpus bleu_chrf pairs state_json}
cd "$(dirname "$0")"
dir=${FUZZ_TARGET_DIR:-target}
RUSTC_BOOTSTRAP=1 cargo fuzz build --sanitizer none -O --target-dir "$dir" || exit 1
bin=$dir/x86_64-unknown-linux-gnu/release
status=0
for target in $targets; do
  rss=2048
  [ "$target" = checkpoint ] && rss=8192
  mkdir -p corpus/$target artifacts/$target
  echo "== $target: $seconds s"
  /usr/bin/time -f "cpu_s %U %S" $bin/$target corpus/$target seeds/$target -artifact_prefix=artifacts/$target/ \
    -max_total_time=$seconds -timeout=10 -rss_limit_mb=$rss -malloc_limit_mb=2048 -max_len=65536 \
    -print_final_stats=1 2>&1 | grep -E "^(Done|stat::number_of_executed_units|stat::peak_rss_mb|cpu_s|==.*ERROR|.*panicked|SUMMARY|.*Test unit written)" || true
  [ -n "$(ls artifacts/$target)" ] && { echo "!! $target: crash written to fuzz/artifacts/$target"; status=1; }
done
exit $status
