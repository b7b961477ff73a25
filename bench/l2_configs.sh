#!/usr/bin/env bash
# The L2 simulation on every shipped sweep config with --device h100, as a
# user runs it: wall time and peak memory of `hbmscope sweep --config NAME
# --device h100` beside the target (under 1 s, nothing left out), and the
# same sweep with --l2-method enumeration (at most LIMIT seconds). Issue 20's
# target: every shipped config under 1 s with nothing left out (MET/MISSED).
# Usage: bench/l2_configs.sh [build/hbmscope] [LIMIT]
set -u
bin=${1:-build/hbmscope}
limit=${2:-120}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
printf 'target: sweep --config NAME --device h100 under 1 s, no shape left out (one core)\n'
printf '%-14s %-12s %10s %10s  %-8s %s\n' config method time peak target "left out"
for cfg in $(ls "$(dirname "$0")/../configs/sweeps" | sed -n "s/\.json$//p"); do
  for method in runs enumeration; do
    t=$limit
    [ "$method" = runs ] && t=600
    /usr/bin/time -f '%e %M' -o "$out/time" timeout "$t" "$bin" sweep --config "$cfg" --device h100 \
      --l2-method "$method" --format csv --output "$out/r.csv" 2>"$out/err" >/dev/null
    rc=$?
    # (GNU time puts "Command exited with non-zero status N" first where the command fails.)
    read -r secs kb < <(tail -n 1 "$out/time" 2>/dev/null) || { secs=-; kb=0; }
    case $kb in '' | *[!0-9]*) secs=-; kb=0 ;; esac
    [ $rc -eq 124 ] && secs=">$t"
    left=$(sed -n 's/.*L2 simulation left out for \([0-9]*\) shape.*/\1/p' "$out/err" | paste -sd+ | bc 2>/dev/null)
    left=${left:-0}
    verdict=-
    if [ "$method" = runs ]; then
      if [ $rc -eq 0 ] && [ "$left" = 0 ] && awk "BEGIN{exit !($secs < 1)}"; then verdict=MET; else verdict=MISSED; fi
    fi
    printf '%-14s %-12s %9ss %8sMB  %-8s %s\n' "$cfg" "$method" "$secs" "$((kb / 1024))" "$verdict" "$left"
  done
done
