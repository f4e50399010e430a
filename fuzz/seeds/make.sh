#!/bin/sh
# Writes the fuzz targets' seeds (small valid inputs) from a tiny run of this checkout:
#   sh fuzz/seeds/make.sh      (from the repository root; needs `cargo build --release -p xtask`)
# A crash that fuzzing finds is added beside them as crash-<target>-N (never by this script).
set -eu
x=./target/release/xtask
s=fuzz/seeds
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
$x train --run "$tmp/run" --set data.synthetic_size=2000 --set data.synthetic_vocab=8 --set model.d_model=8 \
  --set model.n_heads=2 --set model.n_layers=1 --set model.d_ff=16 --set model.block_size=8 \
  --set train.batch_size=2 --set train.max_steps=2 --set train.eval_every=2 --set train.eval_batches=1 \
  --set train.checkpoint_every=2 --set decode.max_tokens=2 >/dev/null 2>&1
c="$tmp/run/checkpoints/step-0000002"
mkdir -p $s/checkpoint $s/state_json $s/config $s/metrics_log $s/tokenizer_json $s/corpus $s/bleu_chrf $s/pairs
i=0
for f in model.mpk optimizer.mpk state.json manifest.json; do
  { printf "\\$(printf %03o $i)"; cat "$c/$f"; } > $s/checkpoint/$f
  i=$((i + 1))
done
cp "$c/state.json" $s/state_json/state.json
cp "$tmp/run/config.toml" $s/config/resolved.toml
cp configs/mt-synthetic.toml $s/config/mt-synthetic.toml
{ cat "$tmp/run/metrics.jsonl"; printf '\377'; cat "$tmp/run/events.out.tfevents.attend"; } > $s/metrics_log/run
printf 'To be, or not to be: that is the question.\nWhether tis nobler in the mind to suffer\n' > $s/corpus/lines.txt
printf 'caf\303\251 \342\200\224 na\303\257ve\r\n\tline\n\n' > $s/corpus/unicode.txt
printf 'the cat sat on the mat\na dog\n\377the cat is on the mat\nthe dog\n' > $s/bleu_chrf/two.txt
printf 'ein Hund\nzwei Katzen\n\377a dog\ntwo cats\n' > $s/pairs/two.txt
$x bpe train --input $s/corpus/lines.txt --vocab-size 280 --output "$tmp/tok.json" >/dev/null 2>&1
{ cat "$tmp/tok.json"; printf '\377Whether tis nobler'; } > $s/tokenizer_json/small.json
