#!/usr/bin/env bash
# Issue 15's targets for the largest report hbmscope writes (1M rows, about
# 620 MB): compare and merge each in under 30 s and under 4 GB of memory.
# Not a test (timings depend on the machine): prints one line per target.
#   bash bench/report_io.sh [path/to/hbmscope]   (default: build/hbmscope)
# The reports are made at run time in a temporary folder and removed after.
set -u
bin=${1:-build/hbmscope}
[ -x "$bin" ] || { echo "no binary at $bin (build first)"; exit 2; }
command -v /usr/bin/time >/dev/null || { echo "needs /usr/bin/time (GNU time) for the memory figure"; exit 2; }
work=$(mktemp -d /tmp/hbmscope-bench-io-XXXXXX)
trap 'rm -rf "$work"' EXIT

# 1000 batches x 1000 sequence lengths = 1M rows; B's byte counts differ by
# its other block size, so that the verdicts are not all SAME.
"$bin" sweep --batch 1:1000:+1 --seq 64:64000:+64 --head-dim 64 --format json --output "$work/a.json" 2>/dev/null || exit 1
"$bin" sweep --batch 1:1000:+1 --seq 64:64000:+64 --head-dim 64 --block-cols 64 --format json --output "$work/b.json" 2>/dev/null || exit 1
size=$(stat -c %s "$work/a.json")
echo "report: 1000000 rows, $((size / 1000000)) MB"

status=0
measure() {  # NAME -- command...
  local name=$1; shift
  /usr/bin/time -f '%e %M %U %S' -o "$work/time" "$@" >"$work/out" 2>"$work/err"
  local rc=$?
  read -r wall kb user sys <"$work/time"
  local mb=$((kb / 1024))
  local rate
  rate=$(awk -v w="$wall" 'BEGIN { printf "%.0f", (w > 0 ? 1000000 / w : 0) }')
  local verdict=MET
  if [ "$rc" -ne 0 ] || awk -v w="$wall" 'BEGIN { exit !(w >= 30) }' || [ "$mb" -ge 4096 ]; then verdict=MISSED; status=1; fi
  echo "$name: $verdict (${wall} s wall, ${user} s user + ${sys} s system CPU, ${mb} MiB max RSS, $rate rows/s, exit $rc; target < 30 s and < 4096 MiB; load average $(cut -d' ' -f1 /proc/loadavg))"
  [ "$rc" -eq 0 ] || head -3 "$work/err"
}
measure "compare 1M rows (table)" "$bin" compare "$work/a.json" "$work/b.json" --ignore block_cols --output "$work/cmp.txt"
measure "compare 1M rows (json)" "$bin" compare "$work/a.json" "$work/b.json" --ignore block_cols --format json --output "$work/cmp.json"
measure "merge 1M rows" "$bin" merge "$work/a.json" --output "$work/m.json"
exit $status
