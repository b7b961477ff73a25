#!/usr/bin/env bash
# scripts/device-check.sh as a runner, on made-up steps (no GPU, no build): every
# step runs in order even after one fails or times out, each under its declared
# limit and the run's cap; summaries are collected; at most 3 files land in OUT,
# and they exist after every step. With a built hbmscope as the second argument
# and no GPU here, the real measure and sanitizer steps are dry-run: every
# command line they give hbmscope is well formed (each fails only for want of
# a device, exit 1, never a usage error), and their summaries say NOT MEASURED.
set -u
runner=$1
hbmscope=${2:-}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
pass=0 fails=0
check() { local name=$1; shift; if "$@"; then pass=$((pass + 1)); else echo "FAIL: $name"; fails=$((fails + 1)); fi; }
mkdir -p "$work/steps"
cat >"$work/steps/00-first.sh" <<'S'
# limit_s: 5
echo "first ran with REPO=$REPO BUILD=$BUILD HBMSCOPE=$HBMSCOPE PY=$PY STEP_LIMIT_S=$STEP_LIMIT_S"
echo "ALPHA: MET (1.0x)" >"$RESULTS/summary-first.txt"
test -f "$OUT_CHECK/summary.txt" || echo "no summary yet, as expected"
S
cat >"$work/steps/10-fails.sh" <<'S'
# limit_s: 5
echo "BETA: MISSED (0.5x)" >"$RESULTS/summary-fails.txt"
exit 3
S
cat >"$work/steps/20-hangs.sh" <<'S'
# limit_s: 5
echo "GAMMA: NOT MEASURED (timed out)" >"$RESULTS/summary-hangs.txt"
sleep 30
S
cat >"$work/steps/30-after.sh" <<'S'
# limit_s: 5
ls "$OUT_CHECK" >"$RESULTS/out-listing.txt"
echo "DELTA: MET (ran after a failure and a timeout)" >"$RESULTS/summary-after.txt"
S
cat >"$work/steps/40-capped.sh" <<'S'
# limit_s: 100
sleep 30
S
cat >"$work/steps/95-judge.sh" <<'S'
# limit_s: 5
echo "JUDGE: MET (ran with ${STEP_LIMIT_S} s although 40-capped wanted 100)" >"$RESULTS/summary-judge.txt"
S
t0=$(date +%s)
OUT=$work/out OUT_CHECK=$work/out STEPS_DIR=$work/steps BUILD=$work/nobuild RESULTS=$work/results TOTAL_LIMIT_S=19 PY=python3 \
  bash "$runner" >"$work/stdout" 2>&1
rc=$?
dt=$(( $(date +%s) - t0 ))
check "runner exits 0 whatever the steps did" test "$rc" -eq 0
check "the cap holds: about 19 s, not 30 + 30" test "$dt" -le 27
s=$work/out/summary.txt
check "summary written" test -f "$s"
for t in "ALPHA: MET" "BETA: MISSED" "GAMMA: NOT MEASURED" "DELTA: MET"; do
  check "summary has $t" grep -q "$t" "$s"
done
check "a failing step is logged with its status" grep -Eq "10-fails +FAILED\(3\)" "$s"
check "a hanging step is cut at its limit" grep -Eq "20-hangs +TIMEOUT" "$s"
check "a long step gets what is left of the cap" grep -Eq "40-capped +(TIMEOUT|NOT RUN)" "$s"
check "the 9x judge keeps its reserve and runs in full" grep -q "JUDGE: MET (ran with 5 s" "$s"
check "the environment reaches the steps" grep -q "first ran with REPO=.* BUILD=$work/nobuild HBMSCOPE=$work/nobuild/hbmscope PY=python3 STEP_LIMIT_S=5" "$work/out/run.log"
check "OUT already held the summary during a later step" grep -q "summary.txt" "$work/results/out-listing.txt"
check "at most 3 files in OUT" test "$(find "$work/out" -type f | wc -l)" -le 3
check "results travel as one tarball" bash -c "tar -tzf '$work/out/results.tar.gz' | grep -q summary-after.txt"
STEPS='first|after' OUT=$work/out2 OUT_CHECK=$work/out2 STEPS_DIR=$work/steps BUILD=$work/nobuild RESULTS=$work/results2 PY=python3 \
  bash "$runner" >/dev/null 2>&1
check "STEPS picks steps by name" bash -c "grep -q 00-first '$work/out2/summary.txt' && ! grep -q 10-fails '$work/out2/summary.txt'"
if [ -n "$hbmscope" ] && ! "$hbmscope" measure --help 2>/dev/null | grep -q -- "--window"; then
  echo "note: dry run of the measure and sanitizer steps skipped: $hbmscope has no --window (issue 19's shape options)"
elif [ -n "$hbmscope" ] && ! nvidia-smi -L >/dev/null 2>&1; then
  steps=$(dirname "$runner")/device-check.d
  dry=$work/dry
  mkdir -p "$dry/results"
  # A stand-in for hbmscope that logs each call's exit status and stderr.
  cat >"$dry/hbmscope" <<S
#!/usr/bin/env bash
"$hbmscope" "\$@" 2>"$dry/last.err"
rc=\$?
echo "rc \$rc: \$(head -1 "$dry/last.err")" >>"$dry/calls.txt"
cat "$dry/last.err" >&2
exit \$rc
S
  chmod +x "$dry/hbmscope"
  # compute-sanitizer, where there is none, as a pass-through: --tool T --error-exitcode N PROGRAM ARGS...
  mkdir -p "$dry/bin"
  printf '#!/usr/bin/env bash\nshift 4\nexec "$@"\n' >"$dry/bin/compute-sanitizer"
  chmod +x "$dry/bin/compute-sanitizer"
  dry_steps() {  # the real steps, given the stand-in hbmscope and tools
    local step
    for step in "$@"; do
      REPO=$(dirname "$(dirname "$runner")") HBMSCOPE=$dry/hbmscope PY=python3 RESULTS=$dry/results \
        NCU=$dry/bin/ncu PATH="$dry/bin:$PATH" bash "$steps/$step.sh" >"$dry/$step.log" 2>&1
    done
  }
  dry_steps 30-measure 60-sanitizer
  check "dry run: measure was called (6 measure calls, 6 under the sanitizer)" \
    test "$(grep -c '' "$dry/calls.txt" 2>/dev/null)" -eq 12
  check "dry run: every call is well formed and fails only for want of a device" \
    bash -c "! grep -v 'rc 1: hbmscope: error: no CUDA device' '$dry/calls.txt'"
  check "dry run: the full and the windowed measurements are NOT MEASURED" \
    bash -c "grep -q 'MEASURE (hbmscope measure.*NOT MEASURED' '$dry/results/summary-measure.txt' &&
             grep -q 'MEASURE WINDOW.*NOT MEASURED' '$dry/results/summary-measure.txt'"
  # The profiling steps through a stand-in ncu that runs the program it is given.
  printf '#!/usr/bin/env bash\nwhile [ $# -gt 0 ] && ! { [ -f "$1" ] && [ -x "$1" ]; }; do shift; done\n[ $# -gt 0 ] && exec "$@"\nexit 1\n' \
    >"$dry/bin/ncu"
  chmod +x "$dry/bin/ncu"
  mv "$dry/calls.txt" "$dry/calls-measure.txt"
  dry_steps 55-limiters 56-counters
  check "dry run: the profiling steps called measure (8 cases under ncu, 2 floor copies; 3 with --counters, 4 under ncu)" \
    test "$(grep -c '' "$dry/calls.txt" 2>/dev/null)" -eq 17
  check "dry run: every profiling call is well formed and fails only for want of a device" \
    bash -c "! grep -v 'rc 1: hbmscope: error: no CUDA device' '$dry/calls.txt'"
  check "dry run: the profiling summaries say NOT MEASURED" \
    bash -c "grep -q 'LIMITERS.*NOT MEASURED' '$dry/results/summary-limiters.txt' &&
             grep -q 'COUNTERS VS NCU.*NOT MEASURED' '$dry/results/summary-counters.txt' &&
             grep -q 'DECODE COUNTED VS MODEL.*NOT MEASURED' '$dry/results/summary-counters.txt'"
fi
echo "device_check: $pass passed, $fails failed"
[ "$fails" -eq 0 ]
