#!/usr/bin/env bash
# limit_s: 95
# hbmscope measure at 4096 and 8192 x head dim 64 and 128, batch 4 x 16
# heads, causal and not, every kernel (flash v2 and v1 side by side). One
# call per (length, mask), each writing its own JSON, so a timeout loses one.
set -u
kernels=standard,softmax,flash,flash_v1,floor
sum=$RESULTS/summary-measure.txt
if [ ! -x "$HBMSCOPE" ]; then
  echo "MEASURE (hbmscope measure, 8 shapes x 5 kernels): NOT MEASURED ($HBMSCOPE not built)" >"$sum"
  exit 1
fi
rc=0
: >"$RESULTS/measure.err"
for causal in "" --causal; do
  for n in 4096 8192; do
    f=$RESULTS/measure-$n${causal:+-causal}.json
    timeout 23 "$HBMSCOPE" measure --seq "$n" --head-dim 64,128 --batch 4 --heads 16 $causal --kernels "$kernels" \
      --format json --output "$f" 2> >(tee -a "$RESULTS/measure.err" >&2) || rc=$?
  done
done
n=$(ls "$RESULTS"/measure-*.json 2>/dev/null | wc -l)
if [ "$n" -eq 4 ]; then
  echo "MEASURE (hbmscope measure, 8 shapes x 5 kernels): MET (4 of 4 reports written; targets below)"
else
  echo "MEASURE (hbmscope measure, 8 shapes x 5 kernels): NOT MEASURED ($n of 4 reports written; $(grep -m1 'error' "$RESULTS/measure.err" | cut -c1-160))"
fi >"$sum"
exit "$rc"
