#!/usr/bin/env bash
# limit_s: 80
# The GPU's own DRAM counters two ways on the same kernels: `hbmscope measure
# --counters` (CUPTI, one range around one launch after the L2 flush) beside
# Nsight Compute's dram__bytes_read.sum from step 50 (the 4096 x d 128 capture
# of standard, flash and floor, batch 4 x 16 heads). Then decode against the
# model: ncu on our decode kernels, contiguous and paged (page 16), at
# 2 x 128K and 32 x 4K (Llama-3 8B-like: 32 query / 8 kv heads, d 128), fed
# to `reconcile --decode`, and `measure --counters` on the same shapes.
# scripts/counters_summary.py writes the verdicts into summary-counters.txt:
#   COUNTERS VS NCU  MET when every kernel's counted reads agree within 5 %;
#   DECODE NCU       MET when reconcile read every decode capture.
# Dry run without a GPU: REPO=. HBMSCOPE=build/hbmscope PY=python3 RESULTS=/tmp/r NCU=stand-in bash ...
source "$(dirname "$0")/step-env.sh"
log=$RESULTS/56-counters.log
: >"$log"
note() { echo "== $*" >>"$log"; }

note "measure --counters, 4096 x d 128 (step 50's ncu capture is ours-4096-d128-c0.csv)"
timeout 20 "$HBMSCOPE" measure --seq 4096 --head-dim 128 --batch 4 --heads 16 --kernels standard,flash,floor \
  --counters --repeats 3 --format json --output "$RESULTS/counters-4096-d128.json" >>"$log" 2>&1
note "rc=$?"

dec=(--decode --seq 1 --heads 32 --kv-heads 8 --head-dim 128)
for bl in "2 131072" "32 4096"; do
  read -r b l <<<"$bl"
  tag=decode-${b}x$l
  note "measure --counters, $tag"
  timeout 15 "$HBMSCOPE" measure "${dec[@]}" --batch "$b" --seq-kv "$l" --kernels decode,decode_paged --counters \
    --repeats 3 --format json --output "$RESULTS/counters-$tag.json" >>"$log" 2>&1
  note "rc=$?"
  if command -v "$NCU" >/dev/null 2>&1; then
    for k in decode decode_paged; do
      note "ncu: $k $tag"
      timeout 20 "$NCU" --csv --page raw --clock-control none \
        --metrics dram__bytes_read.sum,dram__bytes_write.sum,gpu__time_duration.sum --kernel-name regex:decode \
        "$HBMSCOPE" measure "${dec[@]}" --batch "$b" --seq-kv "$l" --kernels "$k" --repeats 1 --warmup 0 --no-validate \
        >"$RESULTS/ncu-$k-${b}x$l.csv" 2>>"$log"
      note "ncu rc=$?"
      page=(); [ "$k" = decode_paged ] && page=(--page-size 16)
      [ -s "$RESULTS/ncu-$k-${b}x$l.csv" ] || continue
      "$HBMSCOPE" reconcile "$RESULTS/ncu-$k-${b}x$l.csv" "${dec[@]}" --batch "$b" --seq-kv "$l" "${page[@]}" \
        --device h200 >"$RESULTS/reconcile-$k-${b}x$l.txt" 2>>"$log" &&
        "$HBMSCOPE" reconcile "$RESULTS/ncu-$k-${b}x$l.csv" "${dec[@]}" --batch "$b" --seq-kv "$l" "${page[@]}" \
          --device h200 --format json --output "$RESULTS/reconcile-$k-${b}x$l.json" 2>>"$log"
      note "reconcile rc=$?"
    done
  fi
done
"$PY" "$REPO/scripts/counters_summary.py" --results "$RESULTS" >"$RESULTS/summary-counters.txt" 2>>"$log" ||
  echo "COUNTERS VS NCU: NOT MEASURED (scripts/counters_summary.py failed; see 56-counters.log)" \
    >"$RESULTS/summary-counters.txt"
cat "$RESULTS"/reconcile-decode*.txt >>"$log" 2>/dev/null
exit 0
