#!/usr/bin/env bash
# The GPU check in one device call: a runner of step files.
#
#   bash scripts/device-check.sh            (on the GPU machine; OUT set by the device tool)
#   run(command="bash scripts/device-check.sh", carry=[".device-deps"], timeout_s=480)
#
# Steps are scripts/device-check.d/NN-name.sh, run in NN order with bash, each
# under `timeout` of the limit it declares on a line "# limit_s: N". A step
# that fails or times out is logged and the next one runs. The whole run is
# capped at TOTAL_LIMIT_S (default 410 s: with the 5 s a killed step may take to
# die, under 7 minutes): a step gets the smaller of its limit and what is left
# (less the limits of the 90-99 steps still to come, kept in reserve so that
# the targets are always judged); one left with under 5 s is not run.
#
# Each step gets in its environment:
#   REPO      the repository root
#   BUILD     the device build directory (10-build.sh configures and builds
#             hbmscope and hbmscope_gpu_tests there with -DHBMSCOPE_WERROR=OFF)
#   HBMSCOPE  the built binary ($BUILD/hbmscope)
#   PY        a python3 (the one with torch where there is one)
#   RESULTS   a directory for the step's files: reports, CSVs, logs
#   STEP_LIMIT_S  the seconds this step was given (its limit, or less near the cap),
#             so that a step can stop its long part early and still write its summary
# A step that judges a target writes lines "TARGET: MET|MISSED|NOT MEASURED
# (figures)" into $RESULTS/summary-<step>.txt.
#
# Output (at most 8 files under $OUT; rewritten after every step, so a run cut
# short still returns what it did): summary.txt (step table + every
# summary-*.txt), run.log (everything), results.tar.gz ($RESULTS).
#
# Environment knobs: OUT (default ./device-out), BUILD (default ./build-gpu;
# the dry run points it at an existing build), TOTAL_LIMIT_S, STEPS (a regex
# of step names to run, e.g. 'preflight|measure'), DEPS (default ./.device-deps),
# STEPS_DIR (default scripts/device-check.d; tests/device_check_test.sh uses its own).
set -uo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
export REPO
cd "$REPO"
OUT=${OUT:-$REPO/device-out}
mkdir -p "$OUT"
export BUILD=${BUILD:-$REPO/build-gpu}
export HBMSCOPE=${HBMSCOPE:-$BUILD/hbmscope}
export RESULTS=${RESULTS:-$(mktemp -d /tmp/hbmscope-results.XXXXXX)}
mkdir -p "$RESULTS"
total_limit=${TOTAL_LIMIT_S:-410}
only=${STEPS:-.}
steps_dir=${STEPS_DIR:-$REPO/scripts/device-check.d}

deps=${DEPS:-$REPO/.device-deps}/usr
if [ -d "$deps" ]; then
  export CMAKE_PREFIX_PATH=$deps${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}
  export LD_LIBRARY_PATH=$deps/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi
[ -d /usr/local/cuda/bin ] && export PATH=/usr/local/cuda/bin:$PATH
export PYTHONUNBUFFERED=1
if [ -z "${PY:-}" ]; then
  PY=python3
  for c in python3 /opt/torch/.venv/bin/python3; do
    if command -v "$c" >/dev/null 2>&1 && "$c" -c 'import torch' >/dev/null 2>&1; then PY=$c; break; fi
  done
fi
export PY

log=$OUT/run.log
: >"$log"
t0=$(date +%s)
now() { echo $(( $(date +%s) - t0 )); }
say() { echo "== $* (t = $(now) s)" | tee -a "$log"; }

steps_table=$RESULTS/steps.txt
: >"$steps_table"

# summary.txt and results.tar.gz from what exists now.
publish() {
  {
    echo "hbmscope device check, $(date -u +%Y-%m-%dT%H:%M:%SZ), $(now) s so far"
    echo "steps (name, exit status, seconds, limit):"
    sed 's/^/  /' "$steps_table"
    echo
    for f in "$RESULTS"/summary-*.txt; do
      [ -f "$f" ] || continue
      echo "-- $(basename "$f" .txt | sed 's/^summary-//')"
      cat "$f"
    done
  } >"$OUT/summary.txt.tmp" 2>/dev/null && mv -f "$OUT/summary.txt.tmp" "$OUT/summary.txt"
  tar -C "$(dirname "$RESULTS")" -czf "$OUT/results.tar.gz.tmp" "$(basename "$RESULTS")" 2>/dev/null &&
    mv -f "$OUT/results.tar.gz.tmp" "$OUT/results.tar.gz"
}

# Steps numbered 90-99 (the targets' judge) keep their limits in reserve: an
# earlier step gets at most what is left after them, so that the summary is
# judged even when earlier steps run to their limits.
declared=0 reserve=0
for f in "$steps_dir"/[0-9][0-9]-*.sh; do
  l=$(sed -n 's/^# limit_s: *\([0-9][0-9]*\).*/\1/p' "$f" | head -1)
  declared=$((declared + ${l:-60}))
  [[ $(basename "$f" .sh) =~ $only ]] || continue
  case $(basename "$f") in 9[0-9]-*) reserve=$((reserve + ${l:-60})) ;; esac
done
say "device check: REPO=$REPO BUILD=$BUILD RESULTS=$RESULTS PY=$PY; step limits sum to $declared s, run capped at $total_limit s"
[ "$declared" -gt "$total_limit" ] && say "warning: the steps' limits ($declared s) exceed the cap ($total_limit s): the last steps get what is left"

for f in "$steps_dir"/[0-9][0-9]-*.sh; do
  name=$(basename "$f" .sh)
  if ! [[ $name =~ $only ]]; then continue; fi
  limit=$(sed -n 's/^# limit_s: *\([0-9][0-9]*\).*/\1/p' "$f" | head -1)
  limit=${limit:-60}
  left=$((total_limit - $(now)))
  case $name in
    9[0-9]-*) reserve=$((reserve - limit)) ;;
    *) [ "$reserve" -gt 0 ] && left=$((left - reserve - 2)) ;;  # 2 s: whole-second clocks
  esac
  [ "$limit" -gt "$left" ] && limit=$left
  if [ "$limit" -lt 5 ]; then
    say "$name: not run ($left s left of $total_limit for it)"
    printf '%-16s %-12s %5s s  limit %s s\n' "$name" "NOT RUN" 0 0 >>"$steps_table"
    continue
  fi
  say "$name (limit $limit s)"
  s0=$(date +%s)
  # Its own process group, so that a timeout ends everything it started.
  STEP_LIMIT_S=$limit timeout --kill-after=5 "$limit" bash "$f" >>"$log" 2>&1
  rc=$?
  dt=$(( $(date +%s) - s0 ))
  case $rc in
    0) st="ok" ;;
    124|137) st="TIMEOUT" ;;
    *) st="FAILED($rc)" ;;
  esac
  say "$name: $st after $dt s"
  printf '%-16s %-12s %5s s  limit %s s\n' "$name" "$st" "$dt" "$limit" >>"$steps_table"
  publish
done

publish
say "done in $(now) s"
cat "$OUT/summary.txt"
