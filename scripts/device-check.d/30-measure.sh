#!/usr/bin/env bash
# limit_s: 100
# hbmscope measure at 4096 and 8192 x head dim 64 and 128, batch 4 x 16
# heads, causal and not, every kernel (flash v2 and v1 side by side). One
# call per (length, mask), each writing its own JSON, so a timeout loses one.
set -u
kernels=standard,softmax,flash,flash_v1,floor
rc=0
for causal in "" --causal; do
  for n in 4096 8192; do
    f=$RESULTS/measure-$n${causal:+-causal}.json
    timeout 24 "$HBMSCOPE" measure --seq "$n" --head-dim 64,128 --batch 4 --heads 16 $causal --kernels "$kernels" \
      --format json --output "$f" || rc=$?
  done
done
exit "$rc"
