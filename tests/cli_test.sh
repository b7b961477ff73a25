#!/usr/bin/env bash
# The command line as a user meets it: output, exit codes, one-line errors on
# stderr with nothing on stdout, and no half-written report files.
set -u
bin=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fails=0
pass=0

check() {  # check NAME CONDITION...
  local name=$1; shift
  if "$@"; then pass=$((pass + 1)); else echo "FAIL: $name"; fails=$((fails + 1)); fi
}

# expect_error NAME 'stderr substring' ARGS...: non-zero exit, one stderr line, empty stdout
expect_error() {
  local name=$1 want=$2; shift 2
  "$bin" "$@" >"$work/out" 2>"$work/err"
  local rc=$?
  check "$name: non-zero exit" test "$rc" -ne 0
  check "$name: stdout empty" test ! -s "$work/out"
  check "$name: one stderr line" test "$(wc -l <"$work/err")" -eq 1
  if ! grep -qF -- "$want" "$work/err"; then
    echo "FAIL: $name: stderr lacks '$want': $(cat "$work/err")"; fails=$((fails + 1))
  else pass=$((pass + 1)); fi
}

"$bin" >"$work/default" 2>"$work/err"
check "default exits 0" test $? -eq 0
check "default prints 136 MB" grep -q "4096 × 64  *136 MB  *34.6 MB  *2.1 MB" "$work/default"
check "default prints 8192 row" grep -q "8192 × 128  *545 MB  *273 MB  *8.39 MB" "$work/default"
"$bin" model >"$work/model"
check "model = default" cmp -s "$work/default" "$work/model"
check "--version" "$bin" --version
"$bin" --help >"$work/help"; check "--help exits 0" test $? -eq 0
"$bin" model --help >"$work/mhelp"
check "model --help explains columns" grep -q "Every value once (floor)" "$work/mhelp"
check "model --help has examples" grep -q "Examples:" "$work/mhelp"
"$bin" --seq 1024 --head-dim 64 --format json >"$work/j.json"
check "json parses" python3 -c "import json,sys; d=json.load(open('$work/j.json')); assert d['schema']=='hbmscope.report/1'; assert d['rows'][0]['bytes']['floor']==4*2*1024*64"
"$bin" model --format csv --seq 1K:4K:x2 >"$work/r.csv"
check "csv rows" test "$(wc -l <"$work/r.csv")" -eq 4

expect_error "zero" "--seq: '0' must be positive" model --seq 0
expect_error "negative" "'-5' is negative" model --seq=-5
expect_error "non-numeric" "'abc' is not a positive integer" model --head-dim abc
expect_error "empty list" "is an empty list" model --seq ""
expect_error "malformed range" "is not a range" model --seq 1024:2048
expect_error "gqa" "must be a multiple of kv-heads" model --heads 6 --kv-heads 4
expect_error "dtype" "'int4' is not a dtype" model --dtype int4
expect_error "overflow value" "too large for a 64-bit count" model --seq 99999999999999999999999
expect_error "overflow count" "overflows a 64-bit count" model --seq 8G --head-dim 128
expect_error "format" "--format: 'xml'" model --format xml
expect_error "units" "--units: 'furlongs'" model --units furlongs
expect_error "unknown option" "--frobnicate" model --frobnicate
expect_error "unknown command" "error" frobnicate

# --output: written whole; a failing run leaves an existing file untouched.
"$bin" model --format json --output "$work/report.json" 2>/dev/null
check "--output written" python3 -c "import json; json.load(open('$work/report.json'))"
cp "$work/report.json" "$work/before.json"
"$bin" model --seq 8G --head-dim 128 --format json --output "$work/report.json" 2>/dev/null
check "failed run keeps old report" cmp -s "$work/report.json" "$work/before.json"
check "no temp files left" test "$(ls -A "$work" | grep -c '^\.')" -eq 0
expect_error "unwritable output" "cannot write" model --output "$work/no/such/dir/r.json"

# measure: without a CUDA device (CI, this machine) one clear line and exit 1;
# with one, a measured table. Either way `model` is unaffected.
"$bin" measure --help >"$work/meashelp"
check "measure --help explains columns" grep -q "Measured/predicted" "$work/meashelp"
check "measure --help has examples" grep -q "hbmscope measure --seq" "$work/meashelp"
expect_error "measure bad kernels" "--kernels: 'cudnn' is not one of" measure --seq 128 --kernels cudnn
expect_error "measure bad blocks" "not compiled for head dim 64" measure --seq 128 --block-rows 96
if "$bin" measure --seq 256 --head-dim 64 --repeats 2 >"$work/mout" 2>"$work/merr"; then
  check "measure with a device prints a measured table" grep -q "Measured on" "$work/mout"
else
  rc=$?
  check "measure without a device exits 1" test "$rc" -eq 1
  check "measure without a device: stdout empty" test ! -s "$work/mout"
  check "measure without a device: one stderr line" test "$(wc -l <"$work/merr")" -eq 1
  check "measure without a device says so" grep -q "^hbmscope: error: no CUDA device" "$work/merr"
fi
"$bin" model >"$work/model2"
check "model still works" cmp -s "$work/default" "$work/model2"

echo "$pass passed, $fails failed"
test "$fails" -eq 0
