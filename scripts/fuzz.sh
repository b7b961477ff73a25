#!/usr/bin/env bash
# Runs one libFuzzer harness of tests/fuzz/ for a while, building the
# sanitizer tree first (scripts/sanitize-build.sh) unless told not to.
#
#   scripts/fuzz.sh [-b BUILD_DIR] [-t SECONDS] [-n] NAME [LIBFUZZER_OPTION...]
#     NAME        a harness: tests/fuzz/fuzz_NAME.cpp (device_config, report, ...)
#     -t SECONDS  how long (default 60); CI runs each for a short fixed time
#     -b DIR      the sanitizer tree (default build/sanitize)
#     -n          do not build first
#   e.g. scripts/fuzz.sh -t 3600 report -jobs=2 -workers=2
#
# Seeds: tests/fuzz/corpus/NAME/ and, one per line in tests/fuzz/corpus/NAME.options,
# more seed directories (repository-relative) and libFuzzer options (lines
# starting with '-', e.g. -dict=tests/fuzz/json.dict). New inputs go to
# BUILD_DIR/fuzz-corpus/NAME (kept between runs), crashes to
# BUILD_DIR/fuzz-artifacts/ with the command that reproduces them.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir=$root/build/sanitize
seconds=60
build=1
while getopts "b:t:n" o; do
  case $o in
    b) dir=$OPTARG ;;
    t) seconds=$OPTARG ;;
    n) build=0 ;;
    *) sed -n '2,17p' "$0" >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
[ $# -ge 1 ] || { sed -n '2,17p' "$0" >&2; exit 2; }
name=${1#fuzz_}; shift
[ -f "$root/tests/fuzz/fuzz_$name.cpp" ] || { echo "fuzz: no harness tests/fuzz/fuzz_$name.cpp" >&2; exit 2; }
if [ "$build" = 1 ]; then "$root/scripts/sanitize-build.sh" "$dir"; fi
bin=$dir/tests/fuzz/fuzz_$name
[ -x "$bin" ] || { echo "fuzz: $bin is not built (scripts/sanitize-build.sh $dir)" >&2; exit 1; }

corpus=$dir/fuzz-corpus/$name
artifacts=$dir/fuzz-artifacts
mkdir -p "$corpus" "$artifacts"
seeds=()
flags=()
[ -d "$root/tests/fuzz/corpus/$name" ] && seeds+=("$root/tests/fuzz/corpus/$name")
if [ -f "$root/tests/fuzz/corpus/$name.options" ]; then
  while IFS= read -r line; do
    case $line in
      '' | '#'*) ;;
      -dict=*) flags+=("-dict=$root/${line#-dict=}") ;;
      -*) flags+=("$line") ;;
      *) seeds+=("$root/$line") ;;
    esac
  done <"$root/tests/fuzz/corpus/$name.options"
fi
# Each input gets 10 s and 2 GB at most: a reader that is quadratic, or that
# builds gigabytes from a few bytes, is a finding like a crash.
echo "fuzz: $name for $seconds s; seeds: ${seeds[*]:-none}"
set +e
(cd "$artifacts" && "$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
  -print_final_stats=1 -artifact_prefix="$artifacts/${name}-" "${flags[@]}" "$@" "$corpus" "${seeds[@]}")
rc=$?
set -e
if [ $rc -ne 0 ]; then
  echo "fuzz: $name found a problem; reproduce with: $bin $artifacts/${name}-<crash|timeout|oom>-..." >&2
  ls -t "$artifacts" | grep "^$name-" | head -3 | sed "s|^|  $artifacts/|" >&2
fi
exit $rc
