#!/usr/bin/env bash
# limit_s: 90
# Nsight Compute on our kernels and on PyTorch SDPA's backends (flash, cuDNN,
# efficient, math), fed to `hbmscope reconcile`, so that the first GPU run
# checks the importer on real ncu output and compares counted DRAM reads with
# the model (issue 11's shapes: batch 4 x 16 heads, 4096 and 8192, d = 128,
# causal and not). Writes its CSVs, reports and logs into $RESULTS, and
# $RESULTS/summary-50-ncu.txt. Dry run without a GPU:
#   REPO=. HBMSCOPE=build/hbmscope PY=python3 RESULTS=/tmp/r NCU=true bash scripts/device-check.d/50-ncu.sh
source "$(dirname "$0")/step-env.sh"
log=$RESULTS/50-ncu.log
summary=$RESULTS/summary-50-ncu.txt
: >"$summary"
metrics=dram__bytes_read.sum,dram__bytes_write.sum,gpu__time_duration.sum
ncu_args=(--csv --page raw --clock-control none --metrics "$metrics")
t0=$(date +%s)
note() { echo "== $* (t = $(( $(date +%s) - t0 )) s)" >>"$log"; }
line() { echo "$*" >>"$summary"; }

if ! command -v "$NCU" >/dev/null 2>&1; then
  line "NCU-RECONCILE: NOT MEASURED (no ncu on the PATH)"
  exit 0
fi
"$NCU" --version >"$RESULTS/ncu-version.txt" 2>&1
note "ncu $(tail -1 "$RESULTS/ncu-version.txt")"

# 1. Our kernels, one shape per capture (reconcile gets the shape from the
#    options): no validation, one warm-up and one timed launch of each.
ours_ok=0
for shape in "4096 128 0" "8192 128 1"; do
  set -- $shape
  tag=ours-$1-d$2-c$3
  causal=(); [ "$3" = 1 ] && causal=(--causal)
  note "ncu: hbmscope measure $tag"
  timeout 25 "$NCU" "${ncu_args[@]}" --kernel-name regex:'flash_forward|softmax_rows|floor_kernel|gemm|nvjet|xmma' \
    "$HBMSCOPE" measure --seq "$1" --head-dim "$2" --batch 4 --heads 16 "${causal[@]}" --kernels standard,flash,floor \
    --repeats 1 --warmup 0 --no-validate >"$RESULTS/$tag.csv" 2>>"$log"
  note "ncu rc=$?"
  if "$HBMSCOPE" reconcile "$RESULTS/$tag.csv" --seq "$1" --head-dim "$2" --batch 4 --heads 16 "${causal[@]}" \
       --device h200 >"$RESULTS/reconcile-$tag.txt" 2>>"$log" &&
     "$HBMSCOPE" reconcile "$RESULTS/$tag.csv" --seq "$1" --head-dim "$2" --batch 4 --heads 16 "${causal[@]}" \
       --device h200 --format json --output "$RESULTS/reconcile-$tag.json" 2>>"$log"; then
    ours_ok=$((ours_ok + 1))
  fi
done

# 2. PyTorch SDPA's four backends, shapes from NVTX ranges, only the measured calls profiled.
note "ncu: PyTorch SDPA"
timeout 50 "$NCU" "${ncu_args[@]}" --nvtx --profile-from-start off \
  "$PY" "$REPO/scripts/sdpa_ncu.py" --seq 4096 8192 --head-dim 128 --batch 4 --heads 16 \
  >"$RESULTS/sdpa-ncu.csv" 2>>"$log"
note "ncu rc=$?"
sdpa_ok=0
if "$HBMSCOPE" reconcile "$RESULTS/sdpa-ncu.csv" --device h200 >"$RESULTS/reconcile-sdpa.txt" 2>>"$log" &&
   "$HBMSCOPE" reconcile "$RESULTS/sdpa-ncu.csv" --device h200 --format json \
     --output "$RESULTS/reconcile-sdpa.json" 2>>"$log"; then
  sdpa_ok=1
fi
cat "$RESULTS"/reconcile-*.txt >>"$log" 2>/dev/null

# Judged: the importer reads real ncu output into attention calls. The verdicts
# per call are figures, not targets (issue 11 records them).
verdicts() {  # the verdicts of a reconcile JSON report, counted
  "$PY" - "$@" <<'PYEOF'
import collections, json, sys
calls = unmatched = 0
seen = collections.Counter()
for f in sys.argv[1:]:
    try:
        d = json.load(open(f))
    except Exception:
        continue
    r = d["reconcile"]
    calls += len(r["calls"])
    unmatched += sum(k["launches"] for k in r["unmatched"])
    for c in r["calls"]:
        seen[c["kind"] + " " + c["verdict"]] += 1
print(f"{calls} calls, {unmatched} unmatched launches; " + ", ".join(f"{k}: {v}" for k, v in sorted(seen.items())))
PYEOF
}
if [ "$ours_ok" -eq 2 ]; then
  line "NCU-RECONCILE-OURS: MET ($(verdicts "$RESULTS"/reconcile-ours-*.json))"
else
  line "NCU-RECONCILE-OURS: MISSED (reconcile read $ours_ok of 2 captures; see 50-ncu.log)"
fi
if [ "$sdpa_ok" -eq 1 ]; then
  line "NCU-RECONCILE-SDPA: MET ($(verdicts "$RESULTS/reconcile-sdpa.json"))"
else
  line "NCU-RECONCILE-SDPA: MISSED (reconcile could not read sdpa-ncu.csv; see 50-ncu.log)"
fi
note "done"
exit 0
