#!/usr/bin/env bash
# Our product kernel's SASS for an H100/H200 (sm_90a), read offline with no GPU
# (scripts/kernel_sass.sh with attend-model's `product_source` example): the registers, spills
# and the instructions of its loop along `k`.
#
#   scripts/product_sass.sh TILE LAYOUT [FMA] [LANES] [ADDRESSES] [TRIANGLE] [STORES]
#     e.g. 64x128x8 forward on pairs offsets full inline
#
# LAYOUT: forward (x·W), dx (dy·Wᵀ) or dw (xᵀ·dy), whole tiles, or with -ragged after it; TRIANGLE: full, output (tril(A·B), attention's
# scores), lower-a (tril(A)·B, its context) or upper-a (triu(A)·B, dV); STORES: inline or apart
# (ATTEND_GPU_STORES). Output in .sass/ (ignored by git),
# named after the arguments; NVIDIA's tools as kernel_sass.sh fetches them.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 2 ] || { sed -n 2,12p "$0"; exit 2; }
tile=$1 layout=$2 fma=${3:-on} lanes=${4:-pairs} addresses=${5:-offsets} triangle=${6:-full} stores=${7:-inline}
exec scripts/kernel_sass.sh product_source "product-$tile-$layout-fma$fma-$lanes-$addresses-$triangle$([ "$stores" = inline ] || echo "-$stores")" \
  "$tile" "$layout" "$fma" "$lanes" "$addresses" "$triangle" "$stores"
