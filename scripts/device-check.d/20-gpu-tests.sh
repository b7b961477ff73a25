#!/usr/bin/env bash
# limit_s: 45
# Every kernel family against the CPU reference on ragged, causal and GQA
# shapes, every flash instantiation of both versions (ctest -L gpu).
set -u
log=$RESULTS/gpu-tests.log
sum=$RESULTS/summary-gpu-tests.txt
if [ ! -x "$BUILD/tests/hbmscope_gpu_tests" ]; then
  echo "GPU TESTS (every kernel vs the CPU reference): NOT MEASURED (hbmscope_gpu_tests not built)" >"$sum"
  exit 1
fi
# Each family under its own limit, so that one hang does not hide the rest;
# all five at once (16 cores for the CPU references, one GPU).
ctest --test-dir "$BUILD" -L gpu -j "${GPU_TEST_JOBS:-5}" --timeout 40 --output-on-failure >"$log" 2>&1
rc=$?
cat "$log"
line=$(grep -E 'tests passed|tests failed' "$log" | tail -1)
skipped=$(grep -c 'Skipped' "$log")
failed=$(sed -n '/tests FAILED/,$p' "$log" | grep -Eo 'gpu_[a-z0-9_]+' | paste -sd, -)
runs=$(grep -E '^[0-9]+ of [0-9]+ passed' "$log" | paste -sd';' -)
if [ -z "$line" ]; then
  echo "GPU TESTS (every kernel vs the CPU reference): NOT MEASURED (ctest ran no gpu test, rc $rc)"
elif [ "$rc" -eq 0 ] && [ "$skipped" -eq 0 ]; then
  echo "GPU TESTS (every kernel vs the CPU reference): MET ($line; checks: $runs)"
elif [ "$rc" -eq 0 ]; then
  echo "GPU TESTS (every kernel vs the CPU reference): NOT MEASURED (skipped: $("$BUILD/tests/hbmscope_gpu_tests" floor 2>&1 | tail -1 | cut -c1-160))"
else
  echo "GPU TESTS (every kernel vs the CPU reference): MISSED ($line; failed: ${failed:-?}; checks: $runs)"
fi >"$sum"
exit "$rc"
