#!/usr/bin/env bash
# limit_s: 60
# compute-sanitizer on small ragged / causal / GQA shapes, the copy probe
# skipped and the L2 flush shrunk (--copy-bytes, --flush-bytes): memcheck on
# every kernel, racecheck and synccheck on both flash kernels (cp.async
# groups, barriers), each at the default blocks and at 64 x 64; the 64 x 64
# runs with a sliding window (issue 19: the first key block is not block 0,
# so the first stage is the odd one, and the band's edges are masked).
set -u
sum=$RESULTS/summary-sanitizer.txt
: >"$sum"
small=(--repeats 1 --warmup 0 --copy-bytes 1M --flush-bytes 1M --format json)
if ! command -v compute-sanitizer >/dev/null 2>&1; then
  for t in memcheck racecheck synccheck; do echo "SANITIZER $t: NOT MEASURED (compute-sanitizer not found)" >>"$sum"; done
  exit 1
fi
overall=0
run() { # tool, limit, label, measure args...
  local tool=$1 lim=$2 label=$3; shift 3
  local log=$RESULTS/sanitizer-$tool-$label.log
  timeout "$lim" compute-sanitizer --tool "$tool" --error-exitcode 9 "$HBMSCOPE" measure "${small[@]}" "$@" \
    --output "$RESULTS/sanitizer-$tool-$label.json" >"$log" 2>&1
  local rc=$? errs
  # memcheck, synccheck: "ERROR SUMMARY: N errors"; racecheck: "RACECHECK SUMMARY:
  # N hazards displayed (E errors, W warnings)".
  errs=$(grep -Eo 'RACECHECK SUMMARY: .*\(([0-9]+) error' "$log" | tail -1 | grep -Eo '[0-9]+ error' | grep -Eo '[0-9]+')
  [ -z "$errs" ] && errs=$(grep -Eo 'ERROR SUMMARY: [0-9]+ error' "$log" | tail -1 | grep -Eo '[0-9]+')
  tail -3 "$log"
  if [ "$rc" -eq 0 ] && [ "${errs:-x}" = 0 ]; then
    echo "SANITIZER $tool ($label): MET (0 errors)"
  elif [ "$rc" -eq 9 ] || [ "${errs:-0}" != 0 ]; then
    echo "SANITIZER $tool ($label): MISSED (${errs:-?} errors; results/$(basename "$log"))"; overall=1
  else
    echo "SANITIZER $tool ($label): NOT MEASURED (rc $rc: $(grep -m1 -iE 'error|no CUDA' "$log" | cut -c1-140))"; overall=1
  fi >>"$sum"
}
shape=(--seq 300 --seq-kv 513 --head-dim 64,128 --heads 4 --kv-heads 2 --causal)
run memcheck 20 default "${shape[@]}" --kernels standard,softmax,flash,flash_v1,floor
run memcheck 8 64x64-window "${shape[@]}" --window 100 --block-rows 64 --block-cols 64 --kernels flash,flash_v1
tiny=(--seq 200 --seq-kv 333 --head-dim 64,128 --heads 2 --kv-heads 1 --causal --kernels flash,flash_v1)
run racecheck 10 default "${tiny[@]}"
run racecheck 6 64x64-window "${tiny[@]}" --window 70 --block-rows 64 --block-cols 64
run synccheck 8 default "${tiny[@]}"
run synccheck 6 64x64-window "${tiny[@]}" --window 70 --block-rows 64 --block-cols 64
cat "$sum"
exit "$overall"
