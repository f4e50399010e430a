#!/bin/sh
# Fuzzes every target in turn for SECONDS each (default 450: one CPU-hour for the eight):
#   sh fuzz/run.sh [SECONDS]        (from the repository root)
# Builds with the stable toolchain (RUSTC_BOOTSTRAP=1 lets cargo fuzz pass its -Z flags),
# without a sanitizer (libFuzzer still catches panics, aborts, segfaults, timeouts and
# allocations over the limit). A panic, a hang over 10 s or more than 2 GB of memory is a crash:
# libFuzzer writes it to fuzz/artifacts/TARGET/ and stops that target.
set -u
seconds=${1:-450}
cd fuzz
RUSTC_BOOTSTRAP=1 cargo fuzz build --sanitizer none -O || exit 1
bin=target/x86_64-unknown-linux-gnu/release
status=0
for target in tokenizer_json checkpoint config metrics_log corpus bleu_chrf pairs state_json; do
  mkdir -p corpus/$target artifacts/$target
  echo "== $target: $seconds s"
  $bin/$target corpus/$target seeds/$target -artifact_prefix=artifacts/$target/ \
    -max_total_time=$seconds -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=2048 -max_len=65536 \
    -print_final_stats=1 2>&1 | grep -E "^(#[0-9]+ *DONE|Done|stat::number_of_executed_units|stat::peak_rss_mb|==.*ERROR|.*panicked|SUMMARY|artifact_prefix.*Test unit written)" || true
  [ -n "$(ls artifacts/$target)" ] && { echo "!! $target: crash written to fuzz/artifacts/$target"; status=1; }
done
exit $status
