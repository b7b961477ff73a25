#!/usr/bin/env bash
# limit_s: 150
# What limits the kernels whose speed targets were missed on the first run
# (docs/results/2026-12-04-h200.md): Nsight Compute's throughput, occupancy,
# launch and warp-state sections, one launch per case (the timed one: the
# first, untimed launch is skipped), on softmax (4096 causal, 4096, 8192),
# the floor (8192, d 128), flash v2 beside PyTorch's flash (4096, d 128), and
# decode, contiguous and paged (2 x 128K and 8 x 32K). Each case's report is
# turned into a details text and a raw CSV; scripts/limiters.py reads the CSVs
# into one table (time, DRAM/SM/L2/tensor throughput, occupancy, the top warp
# stalls, the limiter) in $RESULTS/limiters.txt, and the step's summary line.
# Dry run without a GPU (a stand-in ncu that runs the program it is given):
#   REPO=. HBMSCOPE=build/hbmscope PY=python3 RESULTS=/tmp/r NCU=path/to/stand-in bash scripts/device-check.d/55-limiters.sh
source "$(dirname "$0")/step-env.sh"
mkdir -p "$RESULTS/limiters"
log=$RESULTS/55-limiters.log
summary=$RESULTS/summary-limiters.txt
: >"$summary"
if ! command -v "$NCU" >/dev/null 2>&1; then
  echo "LIMITERS (ncu sections on the missed targets' kernels): NOT MEASURED (no ncu on the PATH)" >"$summary"
  exit 0
fi
sections=(--section SpeedOfLight --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis
          --section LaunchStats --section Occupancy --section WarpStateStats --section SchedulerStats)
extra=dram__bytes_read.sum,dram__bytes_write.sum,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active
prefill=(--batch 4 --heads 16 --head-dim 128 --repeats 1 --warmup 0 --no-validate)
decode=(measure --decode --seq 1 --heads 32 --kv-heads 8 --head-dim 128 --repeats 1 --warmup 0 --no-validate)
# tag | kernel-name regex | launches to skip | command
cases=(
  "softmax-4096-causal|softmax_rows|1|$HBMSCOPE measure --seq 4096 --causal --kernels softmax ${prefill[*]}"
  "softmax-4096|softmax_rows|1|$HBMSCOPE measure --seq 4096 --kernels softmax ${prefill[*]}"
  "softmax-8192|softmax_rows|1|$HBMSCOPE measure --seq 8192 --kernels softmax ${prefill[*]}"
  "floor-8192|floor_kernel|1|$HBMSCOPE measure --seq 8192 --kernels floor ${prefill[*]}"
  "flash-v2-4096|flash_forward_v2|1|$HBMSCOPE measure --seq 4096 --kernels flash ${prefill[*]}"
  "torch-flash-4096|flash_fwd|0|$PY $REPO/scripts/sdpa_ncu.py --seq 4096 --head-dim 128 --batch 4 --heads 16 --causal 0 --backends flash"
  "decode-2x131072|decode_split_kernel|1|$HBMSCOPE ${decode[*]} --batch 2 --seq-kv 131072 --kernels decode"
  "decode-paged-2x131072|decode_split_kernel|1|$HBMSCOPE ${decode[*]} --batch 2 --seq-kv 131072 --kernels decode_paged"
  "decode-paged-8x32768|decode_split_kernel|1|$HBMSCOPE ${decode[*]} --batch 8 --seq-kv 32768 --kernels decode_paged"
)
t0=$(date +%s)
budget=${STEP_LIMIT_S:-150}
done_n=0
csvs=()
for c in "${cases[@]}"; do
  IFS='|' read -r tag regex skip cmd <<<"$c"
  # Leave 15 s for the last imports and the table.
  if [ $(( $(date +%s) - t0 )) -gt $((budget - 30)) ]; then
    echo "== $tag: not run (step time nearly spent)" >>"$log"
    continue
  fi
  echo "== $tag: $cmd" >>"$log"
  from=()
  case $tag in torch-*) from=(--profile-from-start off) ;; esac
  # shellcheck disable=SC2086 # cmd is split into words on purpose
  timeout 40 "$NCU" --clock-control none "${sections[@]}" --metrics "$extra" "${from[@]}" \
    --kernel-name "regex:$regex" --launch-skip "$skip" --launch-count 1 -f -o "$RESULTS/limiters/$tag" \
    $cmd >>"$log" 2>&1
  echo "ncu rc=$?" >>"$log"
  rep=$RESULTS/limiters/$tag.ncu-rep
  [ -f "$rep" ] || continue
  "$NCU" --import "$rep" --page details >"$RESULTS/limiters/$tag-details.txt" 2>>"$log"
  "$NCU" --import "$rep" --csv --page raw >"$RESULTS/limiters/$tag-raw.csv" 2>>"$log" &&
    csvs+=("$tag=$RESULTS/limiters/$tag-raw.csv") && done_n=$((done_n + 1))
  rm -f "$rep"  # the details and the raw CSV keep what it says
done
# The floor against a copy of its own size (2 x 256 MiB = 537 MB moved, the
# floor's 520 MB at 8192 x d 128) beside the default 1 GiB copy: how much of
# the gap is the fixed cost of a shorter kernel.
for cb in 268435456 1073741824; do
  timeout 15 "$HBMSCOPE" measure --seq 8192 --head-dim 128 --batch 4 --heads 16 --kernels floor --copy-bytes "$cb" \
    --format json --output "$RESULTS/floor-copy-$cb.json" >>"$log" 2>&1
done
floor_copy=$("$PY" - "$RESULTS"/floor-copy-*.json <<'PYEOF' 2>>"$log"
import json, sys
out = []
for f in sys.argv[1:]:
    try:
        row = json.load(open(f))["rows"][0]
        m = [x for x in row["measurements"] if x["kernel"] == "floor"][0]
        size = int(f.rsplit("-", 1)[1].split(".")[0])
        out.append(f"{m['copy_fraction']:.3f} of a copy of 2 x {size >> 20} MiB")
    except Exception as e:
        out.append(f"{f}: {e}")
print("; ".join(out))
PYEOF
)
if [ "$done_n" -gt 0 ] &&
   "$PY" "$REPO/scripts/limiters.py" "${csvs[@]}" >"$RESULTS/limiters.txt" 2>>"$log"; then
  echo "LIMITERS (ncu sections on the missed targets' kernels): MET ($done_n of ${#cases[@]} cases profiled; limiters.txt)" >"$summary"
  sed 's/^/  /' "$RESULTS/limiters.txt" >>"$summary"
  echo "  floor 8192 x d128 (520 MB): ${floor_copy:-not measured}" >>"$summary"
else
  echo "LIMITERS (ncu sections on the missed targets' kernels): NOT MEASURED ($done_n of ${#cases[@]} cases profiled; see 55-limiters.log)" >"$summary"
fi
exit 0
