#!/usr/bin/env bash
# limit_s: 95
# hbmscope measure at 4096 and 8192 x head dim 64 and 128, batch 4 x 16
# heads, causal and not, every kernel (flash v2 and v1 side by side). One
# call per (length, mask), each writing its own JSON, so a timeout loses one.
# Then sliding windows (issue 19) beside them: the same 4096 causal shapes
# with a window of 1024 (flash, flash_v1, standard: the flash kernels skip the
# key blocks outside the band), and a decode step over 32K keys with a
# window of 4096 (decode, decode_paged: only the window's keys are read),
# into window-*.json (not measure-*.json: the targets compare full masks with
# PyTorch; scripts/device_summary.py shows the windowed times beside the full).
# 4 x 18 s + 12 s + 10 s = 94 s.
set -u
kernels=standard,softmax,flash,flash_v1,floor
sum=$RESULTS/summary-measure.txt
if [ ! -x "$HBMSCOPE" ]; then
  echo "MEASURE (hbmscope measure, 8 shapes x 5 kernels): NOT MEASURED ($HBMSCOPE not built)" >"$sum"
  echo "MEASURE WINDOW (flash W=1024, decode W=4096): NOT MEASURED ($HBMSCOPE not built)" >>"$sum"
  exit 1
fi
rc=0
: >"$RESULTS/measure.err"
for causal in "" --causal; do
  for n in 4096 8192; do
    f=$RESULTS/measure-$n${causal:+-causal}.json
    timeout 18 "$HBMSCOPE" measure --seq "$n" --head-dim 64,128 --batch 4 --heads 16 $causal --kernels "$kernels" \
      --format json --output "$f" 2> >(tee -a "$RESULTS/measure.err" >&2) || rc=$?
  done
done
timeout 12 "$HBMSCOPE" measure --seq 4096 --head-dim 64,128 --batch 4 --heads 16 --causal --window 1024 \
  --kernels flash,flash_v1,standard --format json --output "$RESULTS/window-4096-causal.json" \
  2> >(tee -a "$RESULTS/measure.err" >&2) || rc=$?
timeout 10 "$HBMSCOPE" measure --decode --seq 1 --seq-kv 32768 --batch 8 --heads 32 --kv-heads 8 --head-dim 128 \
  --causal --window 4096 --kernels decode,decode_paged --format json --output "$RESULTS/window-decode.json" \
  2> >(tee -a "$RESULTS/measure.err" >&2) || rc=$?
n=$(ls "$RESULTS"/measure-*.json 2>/dev/null | wc -l)
if [ "$n" -eq 4 ]; then
  echo "MEASURE (hbmscope measure, 8 shapes x 5 kernels): MET (4 of 4 reports written; targets below)"
else
  echo "MEASURE (hbmscope measure, 8 shapes x 5 kernels): NOT MEASURED ($n of 4 reports written; $(grep -m1 'error' "$RESULTS/measure.err" | cut -c1-160))"
fi >"$sum"
w=$(ls "$RESULTS"/window-*.json 2>/dev/null | wc -l)
if [ "$w" -eq 2 ]; then
  echo "MEASURE WINDOW (flash W=1024, decode W=4096): MET (2 of 2 reports written; figures in the targets' table)"
else
  echo "MEASURE WINDOW (flash W=1024, decode W=4096): NOT MEASURED ($w of 2 reports written; $(grep -m1 'error' "$RESULTS/measure.err" | cut -c1-160))"
fi >>"$sum"
exit "$rc"
