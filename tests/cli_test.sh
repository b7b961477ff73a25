#!/usr/bin/env bash
# The command line as a user meets it: output, exit codes, one-line errors on
# stderr with nothing on stdout, and no half-written report files.
set -u
bin=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")  # absolute: some checks cd
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
check "json parses" python3 -c "import json,sys; d=json.load(open('$work/j.json')); assert d['schema']=='hbmscope.report/3'; assert d['rows'][0]['bytes']['floor']==4*2*1024*64"
"$bin" model --format csv --seq 1K:4K:x2 >"$work/r.csv"
check "csv rows" test "$(wc -l <"$work/r.csv")" -eq 4

# The L2 simulation hook: extra columns, JSON fields, and its options' errors.
"$bin" model --l2-bytes 60M >"$work/l2" 2>"$work/err"
check "l2 sim exits 0" test $? -eq 0
check "l2 sim title" grep -q "simulated L2 of 60 MiB, 132 SMs × 2 CTAs, query-block-major" "$work/l2"
check "l2 sim columns" grep -q "flash_l2_sim  *standard_l2_sim" "$work/l2"
check "l2 sim detail table" grep -q "L2 hit (flash).*Heads/wave.*L2 for floor" "$work/l2"
check "l2 sim: one head reaches the floor" grep -q "4096 × 64  *136 MB  *34.6 MB  *2.1 MB  *2.1 MB" "$work/l2"
"$bin" model --seq 2048 --head-dim 128 --heads 4 --kv-heads 2 --causal --l2-bytes 1 --format json >"$work/l2.json"
check "l2 sim json, L2 of 1 byte = flash_no_l2" python3 -c "
import json; r=json.load(open('$work/l2.json'))['rows'][0]
assert r['bytes']['flash_l2_sim']==r['bytes']['flash_no_l2'], r
assert r['bytes']['standard_l2_sim']==r['bytes']['standard'], r
d=r['l2_sim']; assert d['l2_bytes']==1 and d['sm_count']==132 and d['ctas_per_sm']==1, d  # d=128 128x128: only v1, 1 CTA/SM
assert d['order']=='query-block-major' and d['flash']['hit_rate']==0, d
assert d['flash']['read_bytes']+d['flash']['write_bytes']==r['bytes']['flash_l2_sim'], d"
"$bin" model --seq 8K --head-dim 128 --heads 32 --l2-bytes 50M --sms 132 --ctas-per-sm 1 --l2-order head-major --format csv >"$work/l2.csv"
check "l2 sim csv columns" grep -q "bytes_flash_l2_sim.*l2_hit_rate_flash,heads_per_wave" "$work/l2.csv"
check "l2 sim csv order" grep -q ",head-major," "$work/l2.csv"
"$bin" model --format json >"$work/plain.json"
check "no l2_sim field without --l2-bytes" python3 -c "
import json; r=json.load(open('$work/plain.json'))['rows'][0]; assert 'l2_sim' not in r and 'flash_l2_sim' not in r['bytes']"
check "model --help explains the simulation" grep -q "L2 for floor" "$work/mhelp"
expect_error "sms without l2" "--sms needs --l2-bytes" model --sms 132
expect_error "l2 list" "--l2-bytes: '1M,2M' must be one value" model --l2-bytes 1M,2M
expect_error "l2 bad" "--l2-bytes: 'lots'" model --l2-bytes lots
expect_error "l2 order" "--l2-order: 'diagonal'" model --l2-bytes 1M --l2-order diagonal
expect_error "zero sms" "--sms: '0' must be positive" model --l2-bytes 1M --sms 0
expect_error "l2 sim too large" "work units" model --seq 64M --causal --head-dim 64 --l2-bytes 1M
"$bin" model --seq 16M --head-dim 64 --l2-bytes 1M --format csv >"$work/l2long.csv"
check "no mask: 16M tokens simulated in waves" grep -q "flash_l2_sim" "$work/l2long.csv"
expect_error "--l2-method bad" "--l2-method: 'fast' is not one of runs, enumeration" model --l2-bytes 1M --l2-method fast
expect_error "--l2-method without a simulation" "--l2-method needs --l2-bytes or --device" model --l2-method runs
"$bin" model --seq 1K,3000 --head-dim 64 --heads 4 --kv-heads 2 --causal --l2-bytes 300K --format csv --l2-method runs >"$work/m_runs.csv"
"$bin" model --seq 1K,3000 --head-dim 64 --heads 4 --kv-heads 2 --causal --l2-bytes 300K --format csv --l2-method enumeration >"$work/m_enum.csv"
check "--l2-method runs and enumeration give the same report" cmp -s "$work/m_runs.csv" "$work/m_enum.csv"

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
for cmd in model sweep measure; do
  expect_error "$cmd --output ''" "--output: '' is empty: give a value" $cmd --output ''
done
expect_error "merge --output ''" "--output: '' is empty: give a value" merge "$work/report.json" --output ''
expect_error "compare --output ''" "--output: '' is empty: give a value" compare "$work/report.json" "$work/report.json" --output ''

# --output onto what is not a plain file. Device nodes are our own copies of
# /dev/null and /dev/full (mknod, as root) so that a regression replaces a
# node in $work, never the real ones; without root a rename in /dev fails anyway.
if mknod "$work/null" c 1 3 2>/dev/null && mknod "$work/full" c 1 7 2>/dev/null; then
  dev_null=$work/null dev_full=$work/full
elif [ "$(id -u)" -ne 0 ]; then
  dev_null=/dev/null dev_full=/dev/full
else
  dev_null= dev_full=
fi
if [ -n "$dev_null" ]; then
  "$bin" model --format json --output "$dev_null" 2>"$work/err"
  check "--output device: exit 0" test $? -eq 0
  check "--output device: still a device" test -c "$dev_null"
  expect_error "--output full device" "cannot write '$dev_full': write: No space left on device" model --output "$dev_full"
  check "--output full device: still a device" test -c "$dev_full"
fi
mkfifo "$work/fifo"
timeout 20 cat "$work/fifo" >"$work/fifo_read" &
reader=$!
timeout 20 "$bin" model --format json --output "$work/fifo" 2>/dev/null
check "--output fifo: exit 0" test $? -eq 0
wait "$reader"
check "--output fifo: still a FIFO" test -p "$work/fifo"
check "--output fifo: report read through it" python3 -c "import json; json.load(open('$work/fifo_read'))"
echo old >"$work/real.json"
ln -s real.json "$work/link.json"
ln -s new.json "$work/dangling.json"
"$bin" model --format json --output "$work/link.json" 2>/dev/null
check "--output symlink: still a link" test -L "$work/link.json"
check "--output symlink: its file replaced" python3 -c "import json; json.load(open('$work/real.json'))"
"$bin" model --format json --output "$work/dangling.json" 2>/dev/null
check "--output dangling symlink: still a link" test -L "$work/dangling.json"
check "--output dangling symlink: file created" python3 -c "import json; json.load(open('$work/new.json'))"
(cd "$work" && "$bin" model --output - >"$work/dash" 2>"$work/dash_err")
check "--output -: stdout" cmp -s "$work/default" "$work/dash"
check "--output -: no file named -" test ! -e "$work/-"
check "--output -: no 'wrote' line" test ! -s "$work/dash_err"
expect_error "--output directory" "is a directory" model --output "$work"
check "--output: no temp files left" test "$(ls -A "$work" | grep -c '^\.')" -eq 0

# Past the file size limit: an error, not death by SIGXFSZ with a temp file left.
mkdir "$work/fsz"
(ulimit -f 1; "$bin" sweep --seq 1K:64K:x2 --head-dim 64,128 --format json --output "$work/fsz/r.json") \
  >"$work/out" 2>"$work/err"
rc=$?
check "file size limit: exit 1" test "$rc" -eq 1
check "file size limit: one stderr line" test "$(wc -l <"$work/err")" -eq 1
check "file size limit: EFBIG" grep -q "cannot write '$work/fsz/r.json': write: File too large" "$work/err"
check "file size limit: nothing left" test -z "$(ls -A "$work/fsz")"

# A name of 250 bytes (the longest a file system takes is 255): the temporary
# file's name is cut to fit, for reports and for plots.
long=$(printf 'n%.0s' $(seq 250))
mkdir "$work/long"
"$bin" model --format json --output "$work/long/$long.json" 2>/dev/null
check "longest report name: written" test -s "$work/long/$long.json"
if command -v gnuplot >/dev/null; then
  (cd "$work/long" && "$bin" model --seq 1K:8K:x2 --plot "$long.svg" >/dev/null 2>&1)
  check "longest plot name: written" grep -q "<svg" "$work/long/$long.svg"
fi
check "long names: no temp files left" test "$(ls -A "$work/long" | grep -c '^\.')" -eq 0

# --pass and --fa1 on model.
"$bin" model --pass bwd --seq 4096 --head-dim 64 --format json >"$work/bwd.json"
check "bwd json" python3 -c "import json; r=json.load(open('$work/bwd.json'))['rows'][0]; assert r['shape']['pass']=='bwd'; assert r['bytes']=={'standard':239075328,'flash_no_l2':107495424,'floor':4210688}, r['bytes']; assert r['flops']==10737418240"
"$bin" model --fa1 >"$work/fa1"
check "--fa1 column" grep -q "4096 × 64  *136 MB  *54 MB  *34.6 MB  *2.1 MB" "$work/fa1"
expect_error "--fa1 with no forward pass" "--fa1: FlashAttention-1's order is modelled for the forward pass only" model --fa1 --pass bwd
expect_error "sweep --fa1 with no forward pass" "add fwd to --pass" sweep --fa1 --pass bwd,fwdbwd
"$bin" model --pass fwd,bwd,fwdbwd --seq 4096 --head-dim 64 >"$work/passes"
check "pass column" grep -q "fwd + bwd  *375 MB  *142 MB  *6.32 MB" "$work/passes"
expect_error "bad pass" "--pass: 'sideways' is not a pass" model --pass sideways

# walk and softmax, piped: the final frame only, no escape codes.
esc=$(printf '\033')
"$bin" walk >"$work/walk" 2>"$work/err"
check "walk exits 0" test $? -eq 0
check "walk piped: one frame" test "$(grep -c 'FlashAttention-[12] order' "$work/walk")" -eq 1
check "walk piped: final frame" grep -q "All 64 tiles done" "$work/walk"
check "walk piped: counter at its total" grep -q "2,359,296 B  of  2,359,296 B  flash_no_l2" "$work/walk"
check "walk piped: no escapes" bash -c "! grep -q '$esc' '$work/walk'"
"$bin" walk --animate --delay 1000 >"$work/walk2"
check "walk --animate piped: final frame only, at once" cmp -s "$work/walk" "$work/walk2"
"$bin" walk --order fa1 --seq 4096 >"$work/walk1"
check "walk fa1 total" grep -q "54,034,432 B  of  54,034,432 B  flash1_no_l2" "$work/walk1"
"$bin" softmax 3 1 4 1 5 9 2 6 --block 3 >"$work/sm" 2>"$work/err"
check "softmax exits 0" test $? -eq 0
check "softmax steps" test "$(grep -c '^Block ' "$work/sm")" -eq 3
check "softmax rescale" grep -q "rescale: l x e^(m - m') = 1.41767 x e^(4 - 9)" "$work/sm"
check "softmax result" grep -q "Largest difference" "$work/sm"
check "softmax piped: no escapes" bash -c "! grep -q '$esc' '$work/sm'"
"$bin" softmax --random 12 --seed 7 --block 5 >"$work/sm2"
"$bin" softmax --random 12 --seed 7 --block 5 >"$work/sm3"
check "softmax --random is reproducible" cmp -s "$work/sm2" "$work/sm3"
"$bin" softmax -1 2 -3 >/dev/null 2>&1; check "softmax negative values" test $? -eq 0
"$bin" softmax --block 1 -- -1e308 1e308 >"$work/sm_big"
check "softmax: a term rescaled by an underflowing factor shows its old value" grep -q "(x 0, was 1)" "$work/sm_big"
check "softmax: no nan in the steps" bash -c "! grep -qi nan '$work/sm_big'"
"$bin" walk --help >"$work/whelp"
check "walk --help teaches" grep -q "Examples:" "$work/whelp"
"$bin" softmax --help >"$work/shelp"
check "softmax --help teaches" grep -q "Examples:" "$work/shelp"
expect_error "softmax non-numeric" "'abc' is not a number" softmax 1 abc
expect_error "softmax block 0" "--block: '0' must be positive" softmax 1 2 --block 0
expect_error "softmax nothing" "no values" softmax
expect_error "softmax all -inf" "every value is -inf" softmax -- -inf -inf
expect_error "walk two shapes" "walk draws one shape" walk --seq 1024,2048
expect_error "walk order" "--order: 'fa3'" walk --order fa3
expect_error "walk bwd" "forward pass only" walk --pass bwd

# Checks that need a terminal (tmux, script) are in tests/terminal_test.sh.
# measure: without a CUDA device (CI, this machine) one clear line and exit 1;
# with one, a measured table. Either way `model` is unaffected.
"$bin" measure --help >"$work/meashelp"
check "measure --help explains columns" grep -q "Measured/predicted" "$work/meashelp"
check "measure --help has examples" grep -q "hbmscope measure --seq" "$work/meashelp"
expect_error "measure bad kernels" "--kernels: 'cudnn' is not one of" measure --seq 128 --kernels cudnn
expect_error "sweep --measure without a device" "no CUDA device" sweep --seq 256 --head-dim 64 --measure --repeats 1
expect_error "sweep --measure bwd" "measure runs forward kernels only" sweep --seq 256 --head-dim 64 --pass bwd --measure
"$bin" sweep --config seed --device h200 --format json >"$work/l2dev.json"
check "--device runs the L2 simulation with the device's L2 and SMs" python3 -c "import json; r=json.load(open('$work/l2dev.json'))['rows'][0]; assert r['l2_sim']['sm_count']==132 and r['l2_sim']['l2_bytes']>0; assert r['bytes']['floor']<=r['bytes']['flash_l2_sim']<=r['bytes']['flash_no_l2']; assert 'flash_l2_sim' in r['prediction']"
"$bin" sweep --seq 4M --causal --head-dim 128 --heads 32 --device h200 --format csv >"$work/big.csv" 2>"$work/big.err"
check "--device skips shapes too large to simulate, with a note" grep -q "L2 simulation left out for 1 shape" "$work/big.err"
expect_error "a failing run prints its error alone, no note" "--variants: 'flash_l2_sim' is not a variant of these rows" sweep --seq 4M --causal --head-dim 64 --heads 32 --device h100 --variants flash_l2_sim
"$bin" sweep --seq 4096 --head-dim 64 --pass fwd,bwd --fa1 --format json >"$work/passes.json"
check "sweep --pass and --fa1" python3 -c "import json; rows=json.load(open('$work/passes.json'))['rows']; assert [r['shape']['pass'] for r in rows]==['fwd','bwd']; assert rows[0]['bytes']['flash1_no_l2']==54034432"
"$bin" sweep --config long-context --device b200 >"$work/lc" 2>/dev/null
check "a variant filter keeps the simulation that refines a kept variant" grep -q "flash_l2_sim" "$work/lc"
check "and drops the detail of a dropped one" bash -c "! grep -q 'L2 hit (standard)' '$work/lc'"
expect_error "measure bwd" "measure runs forward kernels only" measure --seq 128 --pass bwd
expect_error "measure bad blocks" "not compiled for head dim 64" measure --seq 128 --block-rows 96
# Flash v2 beside v1, and the sizes that keep compute-sanitizer runs short (issue 10).
expect_error "measure bad kernel lists both flash kernels" "standard, softmax, flash, flash_v1, floor" measure --seq 128 --kernels flash,flash_v3
expect_error "measure --flush-bytes not a multiple of 16" "--flush-bytes: '1000' must be a multiple of 16" measure --seq 128 --flush-bytes 1000
expect_error "measure --copy-bytes 0" "copy-bytes" measure --seq 128 --copy-bytes 0
expect_error "sweep --copy-bytes needs --measure" "--copy-bytes: needs --measure" sweep --seq 128 --copy-bytes 1M
"$bin" model --seq 2048 --head-dim 64 --l2-bytes 60M --format json >"$work/l2ctas.json"
check "L2 simulation: CTAs per SM of the kernel the shape runs (d=64 128x128: v2, 2)" python3 -c "
import json; d=json.load(open('$work/l2ctas.json'))['rows'][0]['l2_sim']; assert d['ctas_per_sm']==2, d"
"$bin" model --seq 2048 --head-dim 128 --block-cols 64 --l2-bytes 60M --ctas-per-sm 3 --format json >"$work/l2ctas3.json"
check "--ctas-per-sm overrides it" python3 -c "
import json; d=json.load(open('$work/l2ctas3.json'))['rows'][0]['l2_sim']; assert d['ctas_per_sm']==3, d"
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
# Start-up: only measuring loads the CUDA backend (a plugin in a CUDA build), so
# no other command maps the CUDA runtime or cuBLAS (issue 15).
for args in "--version" "model" "sweep --config seed --format json"; do
  LD_DEBUG=files "$bin" $args 2>"$work/lddebug" >/dev/null
  check "'$args' loads no CUDA library" bash -c "! grep -qE 'libcu(blas|blasLt|dart)|libhbmscope_cuda' '$work/lddebug'"
done
if grep -q "built without the CUDA backend" "$work/merr"; then
  check "measure without CUDA says how to get it" grep -q "install the CUDA toolkit and reconfigure: cmake -S . -B build -DHBMSCOPE_CUDA=ON" "$work/merr"
else
  LD_DEBUG=files "$bin" measure --seq 256 --repeats 1 >/dev/null 2>"$work/lddebug"
  check "measure opens the CUDA plugin" grep -q "libhbmscope_cuda.so" "$work/lddebug"
  HBMSCOPE_CUDA_PLUGIN=$work/none/libhbmscope_cuda.so "$bin" measure --seq 256 >"$work/out" 2>"$work/err"
  check "measure without the plugin: exit 1" test $? -eq 1
  check "measure without the plugin: one line" test "$(wc -l <"$work/err")" -eq 1
  check "measure without the plugin says why" grep -q "^hbmscope: error: no CUDA device: cannot load the CUDA backend '$work/none/libhbmscope_cuda.so': " "$work/err"
fi
# ---- Devices, roofline, sweeps, shards, merge, compare, plots (issue 3) ----
src=$(cd "$(dirname "$0")/.." && pwd)
"$bin" devices >"$work/devs"
check "devices exits 0" test $? -eq 0
for d in "H100 SXM" "H200 SXM" "A100 80GB SXM" "B200 (HGX)" "L40S" "RTX 4090"; do
  check "devices lists $d" grep -qF "$d" "$work/devs"
done
check "devices shows units" bash -c "grep -q '3.35 TB/s .*50 MiB .*132' '$work/devs' && grep -q '^h100-sxm, h100  *989 TFLOP/s' '$work/devs'"
check "devices fits 120 columns" python3 -c "import sys; assert max(len(l.rstrip('\n')) for l in open(sys.argv[1], encoding='utf-8')) <= 120" "$work/devs"
"$bin" devices h100 >"$work/dev1"
check "devices NAME shows sources" grep -q "peak_flops_dense.bf16: NVIDIA H100 datasheet" "$work/dev1"
"$bin" devices --format json >"$work/devs.json"
check "devices json" python3 -c "import json; d=json.load(open('$work/devs.json')); assert len(d)>=6 and all('sources' in x for x in d)"

"$bin" model --device h100 >"$work/m_dev"
check "model --device adds a time table" grep -q "^Predicted time on H100 SXM" "$work/m_dev"
check "model --device: 40.7 µs memory-bound" grep -q "40.7 µs (memory)" "$work/m_dev"
"$bin" model --device h100 --bandwidth-fraction 0.5 --format json >"$work/m_dev.json"
check "json has device and predictions" python3 -c "
import json; d=json.load(open('$work/m_dev.json'))
assert d['roofline']['device']['name']=='H100 SXM' and d['roofline']['bandwidth_fraction']==0.5
p=d['rows'][0]['prediction']['standard']
assert abs(p['seconds']-136314880/(3.35e12*0.5))<1e-12 and p['bound']=='memory', p
assert d['rows'][0]['prediction']['floor']['bound']=='compute'"
printf '%s\n' '{"name": "My GPU", "memory_bandwidth_bytes_per_s": 2e12, "l2_bytes": 41943040,' \
  ' "sm_count": 100, "peak_flops_dense": {"bf16": 400e12}}' >"$work/my-gpu.json"
"$bin" model --device "$work/my-gpu.json" >"$work/m_user"
check "user device file works" grep -q "Roofline on My GPU: 2 TB/s" "$work/m_user"
echo '{"name": "X", "memory_bandwidth_bytes_per_s": "fast", "l2_bytes": 1, "sm_count": 1, "peak_flops_dense": {"bf16": 1e12}}' >"$work/badtype.json"
expect_error "device: wrong type" "badtype.json: memory_bandwidth_bytes_per_s: expected a positive number, got \"fast\"" model --device "$work/badtype.json"
echo '{"name": "X", "memory_bandwidth_bytes_per_s": 1e12, "l2_bytes": 1, "peak_flops_dense": {"bf16": 1e12}}' >"$work/nokey.json"
expect_error "device: missing key" "nokey.json: sm_count: missing" model --device "$work/nokey.json"
printf '{"name": "X",' >"$work/broken.json"
expect_error "device: malformed JSON" "broken.json: not valid JSON: parse error" model --device "$work/broken.json"
expect_error "device: no such file" "cannot read" sweep --device "$work/none.json"
expect_error "device: unknown preset" "'tpu9' is not a preset" model --device tpu9
# Input files: numbers out of range, repeated keys, what is not a regular file,
# and file names with control characters (escaped in messages, refused as ids).
sed 's/2e12/1e400/' "$work/my-gpu.json" >"$work/huge.json"
expect_error "device: number out of range" "huge.json: not valid JSON: number overflow parsing '1e400'" model --device "$work/huge.json"
expect_error "devices FILE: number out of range" "huge.json: not valid JSON: number overflow" devices "$work/huge.json"
sed 's/"sm_count": 100,/"sm_count": 100, "sm_count": 50,/' "$work/my-gpu.json" >"$work/dupkey.json"
expect_error "device: repeated key" "dupkey.json: sm_count appears twice" model --device "$work/dupkey.json"
printf '{"axes": {"seq": 1024, "head_dim": 64, "batch": 1e400}}' >"$work/bigbatch.json"
expect_error "config: number out of range" "bigbatch.json: not valid JSON: number overflow" sweep --config "$work/bigbatch.json"
mkfifo "$work/fifo.json"
expect_error "sweep --config: a FIFO" "cannot read '$work/fifo.json': not a regular file" sweep --config "$work/fifo.json"
expect_error "--device: a FIFO" "not a regular file" model --device "$work/fifo.json"
expect_error "merge: a FIFO" "not a regular file" merge "$work/fifo.json"
if mknod "$work/zero.json" c 1 5 2>/dev/null; then  # a copy of /dev/zero: it never ends
  expect_error "merge: a device node" "cannot read '$work/zero.json': not a regular file" merge "$work/zero.json"
  ln -s "$work/zero.json" "$work/zlink.json"
  expect_error "merge: a link to a device node" "not a regular file" merge "$work/zlink.json"
fi
cp "$work/my-gpu.json" "$work/x
b.json"
expect_error "--device: a newline in the file name" "device file '$work/x\nb.json': a control character" model --device "$work/x
b.json" --format json
expect_error "devices: a newline in the file name" "a control character" devices "$work/x
b.json"
printf '{' >"$work/bad
name.json"
expect_error "config: a newline in the file name" "bad\nname.json: not valid JSON" sweep --config "$work/bad
name.json"
printf '{' >"$work/bad$(printf '\377').json"
expect_error "merge: a byte that is not UTF-8 in the file name" "bad\xff.json: not valid JSON" merge "$work/bad$(printf '\377').json"
expect_error "devices: an empty name" "devices: '' is not a preset" devices ""
expect_error "devices: an unknown name" "devices: 'loop1' is not a preset" devices loop1
expect_error "device: no fp8 on A100" "has no fp8 peak" model --device a100 --dtype fp8
expect_error "fraction needs device" "--bandwidth-fraction: needs --device" model --bandwidth-fraction 0.5
expect_error "fraction range" "is not in (0, 1]" model --device h100 --bandwidth-fraction 1.5

"$bin" sweep --config seed >"$work/seed"
check "sweep --config seed = the note's table" cmp -s "$work/seed" "$work/default"
"$bin" sweep --config "$src/configs/sweeps/seed.json" >"$work/seed2"
check "sweep config by path" cmp -s "$work/seed2" "$work/default"
"$bin" sweep --config llm --device h100 >"$work/llm"
check "llm config has model groups" grep -q "^Llama-3 70B  *131072 × 128" "$work/llm"
"$bin" sweep --config llm --dtype fp8 --format json >"$work/llm8.json"
check "options override config axes" python3 -c "import json; d=json.load(open('$work/llm8.json')); assert len(d['rows'])==18 and all(r['shape']['dtype']=='fp8' for r in d['rows'])"
"$bin" sweep --config long-context --format csv >"$work/long.csv"
check "long-context reaches 1M tokens" grep -q ",1048576,1048576,128," "$work/long.csv"
check "csv header is one line of names" python3 -c "
import csv; r=list(csv.reader(open('$work/long.csv'))); h=r[0]
assert h[:3]==['batch','heads','kv_heads'] and 'label' in h and len(set(h))==len(h) and all(len(x)==len(h) for x in r)"
if python3 -c "import pandas" 2>/dev/null; then
  check "pandas reads the csv" python3 -c "import pandas as pd; d=pd.read_csv('$work/long.csv'); assert d['seq_q'].max()==1048576"
fi
check "long-context reports only the flash variants" bash -c "head -1 '$work/long.csv' | grep -q 'bytes_flash_no_l2,bytes_floor,' && ! head -1 '$work/long.csv' | grep -q bytes_standard"
"$bin" sweep --seq 4K --variants floor >"$work/var"
check "--variants keeps only those" bash -c "grep -q 'Every value once' '$work/var' && ! grep -q 'Standard attention' '$work/var'"
expect_error "--variants: unknown id" "--variants: 'flash' is not a variant of these rows" sweep --variants flash
echo '{"axes": {"seq": 1024, "head_dim": 64, "sequence": 5}}' >"$work/cfg_unknown.json"
expect_error "config: unknown key" "cfg_unknown.json: axes.sequence: unknown key" sweep --config "$work/cfg_unknown.json"
echo '{"axes": {"seq": [], "head_dim": 64}}' >"$work/cfg_empty.json"
expect_error "config: empty axis" "cfg_empty.json: axes.seq: expected a positive integer" sweep --config "$work/cfg_empty.json"
echo '{"axes": {"seq": 1024, "head_dim": "64b"}}' >"$work/cfg_type.json"
expect_error "config: bad value" "cfg_type.json: axes.head_dim: '64b' is not a positive integer" sweep --config "$work/cfg_type.json"
printf '{"axes": ' >"$work/cfg_broken.json"
expect_error "config: malformed JSON" "cfg_broken.json: not valid JSON" sweep --config "$work/cfg_broken.json"
expect_error "config: unknown name" "'gpt5' is not a shipped config" sweep --config gpt5

# --output through the CLI: whole file, old file kept on failure, no temporary left.
"$bin" sweep --config llm --format json --output "$work/sw.json" 2>/dev/null
check "sweep --output written" python3 -c "import json; assert len(json.load(open('$work/sw.json'))['rows'])==18"
cp "$work/sw.json" "$work/sw_before.json"
"$bin" sweep --config "$work/cfg_unknown.json" --format json --output "$work/sw.json" 2>/dev/null
check "sweep: failed config keeps old report" cmp -s "$work/sw.json" "$work/sw_before.json"
"$bin" sweep --seq 8G --head-dim 128 --format json --output "$work/sw.json" 2>/dev/null
check "sweep: overflow keeps old report" cmp -s "$work/sw.json" "$work/sw_before.json"
check "sweep: no temp files left" test "$(ls -A "$work" | grep -c '^\.')" -eq 0

# Shards: disjoint, union = sweep, for several sweeps and counts; merge joins them.
for spec in seed llm long-context "--seq 1K:32K:x2 --head-dim 64,128 --dtype bf16,fp8"; do
  if [ "${spec#--}" != "$spec" ]; then args=($spec); else args=(--config "$spec"); fi
  "$bin" sweep "${args[@]}" --format json --output "$work/full.json" 2>/dev/null
  for n in 1 2 3 5 7 25; do
    files=()
    for i in $(seq 1 "$n"); do
      "$bin" sweep "${args[@]}" --shard "$i/$n" --format json --output "$work/s$i.json" 2>/dev/null
      files+=("$work/s$i.json")
    done
    check "shards [$spec] $n: disjoint, union = sweep" python3 -c "
import json,sys
key=lambda r: json.dumps([r.get('label',''),r['shape']],sort_keys=True)
full=[key(r) for r in json.load(open('$work/full.json'))['rows']]
joined=[key(r) for f in sys.argv[1:] for r in json.load(open(f))['rows']]
assert joined==full and len(set(joined))==len(joined)" "${files[@]}"
    rev=()
    for ((k = ${#files[@]} - 1; k >= 0; k--)); do rev+=("${files[$k]}"); done
    "$bin" merge "${rev[@]}" --output "$work/merged.json" 2>/dev/null
    check "merge [$spec] $n (reversed) = sweep" python3 -c "import json; assert json.load(open('$work/merged.json'))==json.load(open('$work/full.json'))"
  done
done
expect_error "shard syntax" "--shard: '0/4'" sweep --shard 0/4
expect_error "shard syntax 2" "--shard: 'half'" sweep --shard half
"$bin" sweep --config llm --shard 1/2 --format json --output "$work/h1.json" 2>/dev/null
"$bin" sweep --config llm --shard 2/2 --format json --output "$work/h2.json" 2>/dev/null
expect_error "merge refuses overlap" "rows overlap" merge "$work/h1.json" "$work/h1.json"
python3 -c "import json; d=json.load(open('$work/h2.json')); d['schema']='hbmscope.report/9'; json.dump(d,open('$work/h2v2.json','w'))"
expect_error "merge refuses other schema" "refusing to mix them" merge "$work/h1.json" "$work/h2v2.json"
# "-0" is read as a signed integer 0: still a non-negative integer; -0.0 is not an integer.
python3 -c "import re; t=open('$work/h1.json').read(); open('$work/negzero.json','w').write(re.sub(r'\"flops\": *\d+', '\"flops\": -0', t, 1)); open('$work/negzerof.json','w').write(re.sub(r'\"flops\": *\d+', '\"flops\": -0.0', t, 1))"
"$bin" merge "$work/negzero.json" >/dev/null 2>"$work/err"
check "merge accepts flops -0" test $? -eq 0
expect_error "merge refuses flops -0.0" "rows[0].flops: expected a non-negative integer, got -0.0" merge "$work/negzerof.json"
python3 -c "t=open('$work/h1.json').read(); open('$work/h1big.json','w').write(t.replace('\"flops\":', '\"flops\": 1e400, \"x\":', 1))"
expect_error "merge: number out of range" "h1big.json: not valid JSON: number overflow" merge "$work/h1big.json"
expect_error "compare: number out of range" "h1big.json: not valid JSON: number overflow" compare "$work/h1.json" "$work/h1big.json"
"$bin" sweep --config llm --shard 2/2 --device h100 --format json --output "$work/h2dev.json" 2>/dev/null
expect_error "merge refuses other device" "different devices" merge "$work/h1.json" "$work/h2dev.json"
expect_error "merge: malformed" "broken.json: not valid JSON" merge "$work/h1.json" "$work/broken.json"
"$bin" merge "$work/h1.json" >/dev/null 2>"$work/merge_note"
check "merge notes missing shards" grep -q "merged 1 of 2 shards" "$work/merge_note"
check "merge names the missing shards" grep -q "merged 1 of 2 shards (.*); missing: 2$" "$work/merge_note"
"$bin" sweep --config llm --shard 3/3 --format json --output "$work/h3_3.json" 2>/dev/null
expect_error "merge refuses shards of different splits" "h1.json is shard 1/2 of" merge "$work/h1.json" "$work/h3_3.json"
expect_error "merge refuses a shard with a whole report" "is not a shard: refusing to mix" merge "$work/h3_3.json" "$work/full.json"
"$bin" sweep --config seed --shard 2/7 --format json --output "$work/s2_7.json" 2>/dev/null
"$bin" sweep --config seed --shard 5/7 --format json --output "$work/s5_7.json" 2>/dev/null
"$bin" merge "$work/s5_7.json" "$work/s2_7.json" >/dev/null 2>"$work/merge_note"
check "merge lists missing shards as ranges" grep -q "missing: 1, 3-4, 6-7$" "$work/merge_note"

# compare
"$bin" sweep --seq 1K:8K:x2 --format json --output "$work/ca.json" 2>/dev/null
"$bin" sweep --seq 2K:16K:x2 --format json --output "$work/cb.json" 2>/dev/null
"$bin" compare "$work/ca.json" "$work/cb.json" --metrics all >"$work/cmp"
check "compare exits 0" test $? -eq 0
check "compare marks SAME" grep -q "3 rows matched: 0 FASTER, 0 SLOWER, 3 SAME" "$work/cmp"
check "compare lists unmatched A" grep -q "Only in A (.*ca.json), 1 rows:" "$work/cmp"
check "compare lists unmatched B" grep -q "^  16384 x 64" "$work/cmp"
check "compare ratio columns" grep -q "\[[0-9]*\] bytes.standard" "$work/cmp"
"$bin" sweep --seq 1K:8K:x2 --device h100 --format json --output "$work/c100.json" 2>/dev/null
"$bin" sweep --seq 1K:8K:x2 --device h200 --format json --output "$work/c200.json" 2>/dev/null
"$bin" compare "$work/c100.json" "$work/c200.json" >"$work/cmp2"
check "H200 is FASTER than H100 on predicted time" grep -q "4 rows matched: 4 FASTER" "$work/cmp2"
"$bin" compare "$work/c100.json" "$work/c200.json" --threshold 50 >"$work/cmp3"
check "threshold 50% makes them SAME" grep -q "4 rows matched: 0 FASTER, 0 SLOWER, 4 SAME" "$work/cmp3"
"$bin" compare "$work/c200.json" "$work/c100.json" --format json >"$work/cmp.json"
check "compare json: SLOWER the other way" python3 -c "import json; d=json.load(open('$work/cmp.json')); assert d['summary']['slower']==4"
expect_error "compare: schema differs" "have different schemas" compare "$work/h1.json" "$work/h2v2.json"
expect_error "compare: malformed" "broken.json: not valid JSON" compare "$work/ca.json" "$work/broken.json"
expect_error "compare: not a report" "schema: missing" compare "$work/ca.json" "$work/my-gpu.json"
expect_error "compare: bad metric" "--metric: 'speed'" compare "$work/ca.json" "$work/cb.json" --metric speed

# Plots through gnuplot.
if command -v gnuplot >/dev/null 2>&1; then
  "$bin" sweep --seq 1K:64K:x2 --head-dim 64,128 --plot "$work/bytes.svg" >"$work/plot_out" 2>/dev/null
  check "plot svg exits 0" test $? -eq 0
  check "plot svg produced" grep -q "<svg" "$work/bytes.svg"
  check "plot: report still printed" grep -q "Standard attention" "$work/plot_out"
  "$bin" sweep --config llm --device h100 --plot "$work/time.png" >/dev/null 2>&1
  check "plot png produced" python3 -c "assert open('$work/time.png','rb').read(8)==b'\x89PNG\r\n\x1a\n'"
  "$bin" sweep --seq 1K:64K:x2 --device h200 --plot - >"$work/dumb"
  check "plot - draws in the terminal" grep -q "sequence length Nq" "$work/dumb"
  check "plot - comes after the table" grep -q "Predicted time on H200 SXM" "$work/dumb"
  check "plot: no temp files left" test "$(ls -A "$work" | grep -c '^\.')" -eq 0
  # User text reaches gnuplot as data, never as commands: backticks, quotes, $,
  # @ in the plot path, a group label and a device name, and line breaks in the path
  # (a label or device name with one is refused on input, below).
  mkdir -p "$work/inj" && cd "$work/inj"
  python3 - <<'PY'
import json
bad = 'x`touch PWNED1`"\\n\'$HOME @m; system(\'touch PWNED2\'); !touch PWNED3'
json.dump({'schema': 'hbmscope.sweep/1', 'axes': {'seq': '1K:4K:x2'},
           'groups': [{'label': bad, 'head_dim': 64}, {'label': 'b', 'head_dim': 128}]}, open('cfg.json', 'w'))
json.dump({'name': bad, 'memory_bandwidth_bytes_per_s': 2e12, 'l2_bytes': 41943040, 'sm_count': 100,
           'peak_flops_dense': {'bf16': 400e12}}, open('dev.json', 'w'))
PY
  odd=$'p`touch PWNED4`$(touch PWNED5)\'"\n!touch PWNED7\nq.svg'
  "$bin" sweep --config cfg.json --device dev.json --plot "$odd" >/dev/null 2>"$work/inj_err"
  check "plot injection: exits 0" test $? -eq 0
  check "plot injection: image under its odd name" grep -q "<svg" "$odd"
  "$bin" model --seq 1K:8K:x2 --plot 'x`touch PWNED6`.svg' >/dev/null 2>&1
  check "plot injection: backtick path" grep -q "<svg" 'x`touch PWNED6`.svg'
  for f in PWNED1 PWNED2 PWNED3 PWNED4 PWNED5 PWNED6 PWNED7; do
    check "plot injection: $f not created" test ! -e "$f"
  done
  cd - >/dev/null
fi
# Names and labels reach table cells, CSV fields and plot titles: control
# characters are refused on input, and a '|' is escaped in Markdown cells.
python3 - "$work" <<'PY'
import json, sys
w = sys.argv[1]
cfg = lambda label: {'schema': 'hbmscope.sweep/1', 'axes': {'seq': '1K'}, 'groups': [{'label': label, 'head_dim': 64}]}
json.dump(cfg('two\nlines'), open(w + '/nl.json', 'w'))
json.dump(cfg('a|b'), open(w + '/pipe.json', 'w'))
json.dump({'name': 'esc\x1b[31m', 'memory_bandwidth_bytes_per_s': 2e12, 'l2_bytes': 41943040, 'sm_count': 100,
           'peak_flops_dense': {'bf16': 400e12}}, open(w + '/escdev.json', 'w'))
PY
expect_error "label with a newline" "groups[0].label: a control character is not allowed" sweep --config "$work/nl.json"
expect_error "device name with an escape" "name: a control character is not allowed" model --device "$work/escdev.json"
python3 - "$work" <<'PY'
import json, sys
w = sys.argv[1]
dev = {'name': 'D', 'memory_bandwidth_bytes_per_s': 2e12, 'l2_bytes': 41943040, 'sm_count': 100,
       'peak_flops_dense': {'bf16': 400e12}}
json.dump(dict(dev, memory='80 GB\x1b[31m'), open(w + '/escmem.json', 'w'))
json.dump(dict(dev, aliases=['ok', 'a\nb']), open(w + '/escalias.json', 'w'))
json.dump(dict(dev, sources={'name': 'x\ry'}), open(w + '/escsrc.json', 'w'))
json.dump(dict(dev, sources={'na\x1bme': 'x'}), open(w + '/escsrckey.json', 'w'))
json.dump({'description': 'a\x07b', 'axes': {'seq': 1024, 'head_dim': 64}}, open(w + '/escdesc.json', 'w'))
json.dump({'axes': {'seq': '1K\n', 'head_dim': 64}}, open(w + '/escaxis.json', 'w'))
PY
expect_error "device memory with an escape" "escmem.json: memory: a control character is not allowed" devices "$work/escmem.json"
expect_error "device alias with a newline" "escalias.json: aliases[1]: a control character is not allowed" devices "$work/escalias.json"
expect_error "device source with a CR" "escsrc.json: sources.name: a control character is not allowed" devices "$work/escsrc.json"
expect_error "device source key with an escape" 'escsrckey.json: sources.na\x1bme: a control character is not allowed in a key' devices "$work/escsrckey.json"
expect_error "config description with a bell" "escdesc.json: description: a control character is not allowed" sweep --config "$work/escdesc.json"
expect_error "config axis string with a newline" "escaxis.json: axes.seq: a control character is not allowed" sweep --config "$work/escaxis.json"
"$bin" sweep --config "$work/pipe.json" --format md >"$work/pipe.md"
check "md: a | in a label is escaped" grep -qF 'a\|b' "$work/pipe.md"
"$bin" sweep --config "$work/pipe.json" --format json --output "$work/pipe_r.json" 2>/dev/null
python3 -c "import json; d=json.load(open('$work/pipe_r.json')); d['rows'][0]['label']='x\ty'; json.dump(d,open('$work/tab_r.json','w'))"
expect_error "report label with a tab" "a control character is not allowed" compare "$work/pipe_r.json" "$work/tab_r.json"

expect_error "plot: bad extension" "must end in .svg or .png" model --plot "$work/x.pdf"
expect_error "plot: empty" "--plot: '' is empty: give a value" model --plot ''
expect_error "sweep plot: empty" "--plot: '' is empty: give a value" sweep --plot ''
expect_error "plot -: not into json on stdout" "would be mixed into the json" model --plot - --format json
# A plot that cannot be made (no gnuplot on the PATH, a folder that takes no
# file) fails with one line before anything is written: no table, no --output.
mkdir -p "$work/emptybin"
PATH="$work/emptybin" "$bin" model --plot "$work/none.svg" >"$work/nognu_out" 2>"$work/nognu_err"
rc=$?
check "no gnuplot: non-zero exit" test "$rc" -ne 0
check "no gnuplot: clear message" grep -q "gnuplot is not on the PATH" "$work/nognu_err"
check "no gnuplot: one stderr line" test "$(wc -l <"$work/nognu_err")" -eq 1
check "no gnuplot: no report on stdout" test ! -s "$work/nognu_out"
check "no gnuplot: no image" test ! -e "$work/none.svg"
PATH="$work/emptybin" "$bin" model --plot "$work/none.svg" --format json --output "$work/nognu.json" 2>"$work/nognu_err"
check "no gnuplot: --output not written" test ! -e "$work/nognu.json"
check "no gnuplot: --output: one stderr line" test "$(wc -l <"$work/nognu_err")" -eq 1
if command -v gnuplot >/dev/null 2>&1; then
  expect_error "plot into /proc" "--plot: cannot write '/proc/x.svg'" model --plot /proc/x.svg
  expect_error "plot into a missing folder" "--plot: cannot write" model --plot "$work/nodir/x.svg"
  expect_error "plot into a missing folder, --output" "--plot: cannot write" model --plot "$work/nodir/x.svg" --output "$work/noplot.txt"
  check "plot into a missing folder: --output not written" test ! -e "$work/noplot.txt"
  # A plot target that cannot take the chart is refused before the report is
  # written: no table on stdout, no --output file.
  mkdir -p "$work/pt/dir.svg"
  expect_error "plot onto a directory" "--plot: cannot write '$work/pt/dir.svg': it is a directory" model --seq 1K,2K --head-dim 64 --plot "$work/pt/dir.svg"
  expect_error "plot onto a directory, --output" "it is a directory" model --seq 1K,2K --head-dim 64 --plot "$work/pt/dir.svg" --output "$work/pt/o1.json"
  check "plot onto a directory: --output not written" test ! -e "$work/pt/o1.json"
  toolong=$(printf 'a%.0s' $(seq 252)).svg
  expect_error "plot name too long" "--plot: cannot write '$work/pt/$toolong': File name too long" model --plot "$work/pt/$toolong"
  expect_error "plot name too long, --output" "File name too long" model --plot "$work/pt/$toolong" --output "$work/pt/o1.json"
  check "plot name too long: --output not written" test ! -e "$work/pt/o1.json"
  python3 -c "import socket,sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])" "$work/pt/sock.svg"
  expect_error "plot onto a socket" "--plot: cannot write '$work/pt/sock.svg': not a regular file, character device or FIFO" model --plot "$work/pt/sock.svg"
  # One file cannot be both the report and the chart, however it is named.
  expect_error "plot = output" "--plot: '$work/pt/o2.svg' is also the --output file" model --output "$work/pt/o2.svg" --plot "$work/pt/o2.svg"
  expect_error "plot = output, via .." "is also the --output file" model --output "$work/pt/dir.svg/../o2.svg" --plot "$work/pt/o2.svg"
  ln -s o3.svg "$work/pt/o3link.svg"
  expect_error "plot = output, via a link" "is also the --output file" model --output "$work/pt/o3link.svg" --plot "$work/pt/o3.svg"
  check "plot = output: nothing written" test ! -e "$work/pt/o2.svg" -a ! -e "$work/pt/o3.svg"
  "$bin" model --output - --plot - >"$work/pt/both" 2>/dev/null
  check "plot - with --output -: table and chart" grep -q "sequence length Nq" "$work/pt/both"
  # A plot follows --output's rules: a link stays a link, a device or FIFO is written in place.
  ln -s real.svg "$work/pt/link.svg"
  "$bin" model --plot "$work/pt/link.svg" >/dev/null 2>&1
  check "plot symlink: still a link" test -L "$work/pt/link.svg"
  check "plot symlink: its file written" grep -q "<svg" "$work/pt/real.svg"
  if mknod "$work/pt/null.svg" c 1 3 2>/dev/null; then
    "$bin" model --plot "$work/pt/null.svg" >/dev/null 2>&1
    check "plot device: exit 0" test $? -eq 0
    check "plot device: still a device" test -c "$work/pt/null.svg"
  fi
  mkfifo "$work/pt/fifo.svg"
  timeout 20 cat "$work/pt/fifo.svg" >"$work/pt/fifo_read" &
  reader=$!
  timeout 20 "$bin" model --plot "$work/pt/fifo.svg" >/dev/null 2>&1
  check "plot fifo: exit 0" test $? -eq 0
  wait "$reader"
  check "plot fifo: still a FIFO" test -p "$work/pt/fifo.svg"
  check "plot fifo: chart read through it" grep -q "<svg" "$work/pt/fifo_read"
  check "plot targets: no temp files left" test "$(ls -A "$work/pt" | grep -c '^\.')" -eq 0
fi

# Lost standard output is an error for every command: closed, or a full disk.
"$bin" model --format json --output "$work/c.json" 2>/dev/null
for cmd in "model" "sweep --config seed" "devices" "devices --format json" "walk" "softmax 3 1 4" \
           "compare $work/c.json $work/c.json" "merge $work/c.json" "model --help" "--version"; do
  # shellcheck disable=SC2086
  "$bin" $cmd >&- 2>"$work/err"
  rc=$?
  check "$cmd >&-: exit 1" test "$rc" -eq 1
  check "$cmd >&-: says why" grep -qx "hbmscope: error: writing standard output: Bad file descriptor" "$work/err"
  # shellcheck disable=SC2086
  "$bin" $cmd >/dev/full 2>"$work/err"
  rc=$?
  check "$cmd >/dev/full: exit 1" test "$rc" -eq 1
  check "$cmd >/dev/full: says why" grep -qx "hbmscope: error: writing standard output: No space left on device" "$work/err"
done

# Progress bar: never on a pipe; on a terminal for long sweeps; forced with --progress always.
"$bin" sweep --seq 1:150K:+1 --head-dim 64 --format csv >/dev/null 2>"$work/prog_pipe"
check "no progress bar when stderr is piped" test ! -s "$work/prog_pipe"
"$bin" sweep --progress always --seq 1:20K:+1 --head-dim 64 --format csv >/dev/null 2>"$work/prog_forced"
check "progress always draws the bar" grep -q "hbmscope sweep \[#" "$work/prog_forced"
"$bin" sweep --progress always --seq 1:20K:+1 --head-dim 64 --variants foo >/dev/null 2>"$work/prog_err"
check "progress always: an error after the bar starts a line of its own" grep -q "^hbmscope: error: --variants: 'foo'" "$work/prog_err"
expect_error "progress mode" "--progress: 'sometimes'" sweep --progress sometimes
"$bin" sweep --help >"$work/shelp"
check "sweep --help has examples" grep -q "hbmscope sweep --config llm --device h100" "$work/shelp"
"$bin" model --help >"$work/mhelp2"
check "model --help explains --device" grep -q "Time: ID" "$work/mhelp2"

# ---- JSON input from users' files (audit: depth, types, ranges, finiteness) ----
# Deep nesting: refused while parsing at every entry point, exit 1, never a crash.
for n in 100000 1000000; do
  python3 -c "import sys; sys.stdout.write('['*$n + ']'*$n)" >"$work/deep$n.json"
  python3 -c "import sys; sys.stdout.write('{\"a\":'*$n + '1' + '}'*$n)" >"$work/deepobj$n.json"
  for f in "deep$n.json" "deepobj$n.json"; do
    for cmd in "sweep --config" "compare $work/ca.json" "merge" "devices" "model --device" "sweep --device"; do
      read -ra words <<<"$cmd"
      "$bin" "${words[@]}" "$work/$f" >"$work/out" 2>"$work/err"
      rc=$?
      check "deep $f [$cmd]: exit 1" test "$rc" -eq 1
      check "deep $f [$cmd]: says nested too deep" grep -q "^hbmscope: error: .*$f: nested deeper than 64 levels" "$work/err"
    done
    expect_error "deep $f as compare's A" "nested deeper than 64" compare "$work/$f" "$work/ca.json"
  done
done

# Reports read back: a wrong-typed field is one line naming the key, never an internal error.
for v in 1 true null '[]' '{}'; do
  python3 -c "import json; d=json.load(open('$work/c100.json')); d['roofline']['device']['id']=json.loads('$v'); json.dump(d,open('$work/badid.json','w'))"
  expect_error "merge: device id $v" "badid.json: roofline.device.id: expected a string" merge "$work/badid.json"
  expect_error "compare: device id $v" "badid.json: roofline.device.id: expected a string" compare "$work/c100.json" "$work/badid.json"
done
for mod in "r['rows'][0]['prediction']=''|rows[0].prediction: expected an object" \
           "r['rows'][0]['l2_sim']=[]|rows[0].l2_sim: expected an object" \
           "r['roofline']['device']['memory']=80|roofline.device.memory: expected a string" \
           "r['roofline']['bandwidth_fraction']='1'|roofline.bandwidth_fraction: expected a positive number" \
           "r['rows'][0]['prediction']['floor']['seconds']=None|rows[0].prediction.floor.seconds: expected a number, got null"; do
  python3 -c "import json; r=json.load(open('$work/c100.json')); ${mod%%|*}; json.dump(r,open('$work/badfield.json','w'))"
  expect_error "merge: ${mod#*|}" "badfield.json: ${mod#*|}" merge "$work/badfield.json"
  expect_error "compare: ${mod#*|}" "badfield.json: ${mod#*|}" compare "$work/badfield.json" "$work/c100.json"
done

# Device files: numbers in the command line's ranges, predictions always finite.
devfile() {  # devfile FILE SM_COUNT BANDWIDTH PEAK
  printf '{"name": "Odd", "memory_bandwidth_bytes_per_s": %s, "l2_bytes": 1048576, "sm_count": %s, "peak_flops_dense": {"bf16": %s}}\n' "$3" "$2" "$4" >"$1"
}
for n in 4294967297 4294967296 1000001; do
  devfile "$work/sms.json" "$n" 1e12 1e14
  expect_error "device sm_count $n" "sms.json: sm_count: expected a positive integer at most 1000000, got $n" model --device "$work/sms.json"
done
devfile "$work/sms.json" 1000000 1e12 1e14
"$bin" model --device "$work/sms.json" --format json >"$work/sms_out.json"
check "device sm_count 1000000 reaches the simulation unchanged" python3 -c "import json; assert json.load(open('$work/sms_out.json'))['rows'][0]['l2_sim']['sm_count']==1000000"
devfile "$work/slow.json" 132 5e-324 1e14
expect_error "device bandwidth 5e-324" "slow.json: memory_bandwidth_bytes_per_s: expected a rate in bytes/s from 1e6 to 1e18" model --device "$work/slow.json"
devfile "$work/weak.json" 132 1e12 5e-324
expect_error "device peak 5e-324" "weak.json: peak_flops_dense.bf16: expected a rate in FLOP/s from 1e6 to 1e18" model --device "$work/weak.json"
expect_error "fraction 4.9e-324" "--bandwidth-fraction: 5e-324 is below 1e-06" model --device h100 --bandwidth-fraction 4.9e-324
expect_error "fraction 4.9e-324 (sweep)" "is below 1e-06" sweep --config seed --device h100 --bandwidth-fraction 4.9e-324 --format json --output "$work/tiny.json"
check "fraction 4.9e-324: no report written" test ! -e "$work/tiny.json"
"$bin" model --device h100 --bandwidth-fraction 1e-6 --format json >"$work/f6.json"
check "fraction 1e-6: every time finite" python3 -c "
import json,math; d=json.load(open('$work/f6.json'))
assert all(isinstance(p['seconds'],float) and math.isfinite(p['seconds']) for r in d['rows'] for p in r['prediction'].values())"

# A device exported by `devices NAME --format json` loads back, for every preset.
for f in "$src"/configs/devices/*.json; do
  id=$(basename "$f" .json)
  "$bin" devices "$id" --format json >"$work/export-$id.json"
  "$bin" model --device "$work/export-$id.json" --format json >"$work/rt-file.json" 2>"$work/err"
  check "export $id: loads back" test $? -eq 0
  "$bin" model --device "$id" --format json >"$work/rt-preset.json"
  check "export $id: same predictions as the preset" python3 -c "
import json; a=json.load(open('$work/rt-file.json')); b=json.load(open('$work/rt-preset.json'))
for x in (a,b): del x['roofline']['device']['id']
assert a==b"
  "$bin" devices "$work/export-$id.json" >/dev/null
  check "export $id: devices FILE checks it" test $? -eq 0
done
"$bin" devices --format json >"$work/all-devices.json"
expect_error "device list as a device" "devices NAME --format json" model --device "$work/all-devices.json"

# merge names what differs between two reports' rooflines.
"$bin" sweep --config llm --shard 1/2 --device h100 --bandwidth-fraction 0.5 --format json --output "$work/f5.json" 2>/dev/null
"$bin" sweep --config llm --shard 2/2 --device h100 --bandwidth-fraction 0.8 --format json --output "$work/f8.json" 2>/dev/null
expect_error "merge: fractions differ" "(roofline.bandwidth_fraction: 0.8 vs 0.5)" merge "$work/f5.json" "$work/f8.json"
expect_error "merge: devices differ" "(H100 SXM vs none)" merge "$work/h1.json" "$work/h2dev.json"
python3 -c "import json; d=json.load(open('$work/f8.json')); d['roofline']['bandwidth_fraction']=0.5; d['roofline']['device']['memory_bandwidth_bytes_per_s']=3e12; json.dump(d,open('$work/f8bw.json','w'))"
expect_error "merge: a figure differs" "roofline.device.memory_bandwidth_bytes_per_s: 3000000000000.0 vs 3350000000000.0" merge "$work/f5.json" "$work/f8bw.json"

# ---- Limits: bad or huge input is refused at once; long work shows progress ----
# Every run below is under `timeout`: a hang fails the check instead of the suite.
printf '#!/bin/sh\nexec timeout 20 "%s" "$@"\n' "$bin" >"$work/tbin"; chmod +x "$work/tbin"
real_bin=$bin; bin=$work/tbin
timeout 10 "$real_bin" model --seq 1024G --seq-kv 1 --block-rows 1 --device h100 --format csv >/dev/null 2>"$work/huge.err"
check "2^40 query blocks with --device: counted at once, left out" grep -q "left out for 1 shape" "$work/huge.err"
expect_error "2^40 query blocks with --l2-bytes: refused" "work units (at most 17179869184" model --seq 1024G --seq-kv 1 --block-rows 1 --l2-bytes 60M
expect_error "l2 per-shape cap says how" "use bigger --block-rows/--block-cols, fewer heads or a shorter sequence" model --seq 64M --causal --l2-bytes 60M
expect_error "l2 per-shape cap, enumerated" "(enumeration) would take" model --seq 45K --causal --block-rows 1 --block-cols 1 --l2-bytes 60M --l2-method enumeration
expect_error "l2 per-run cap" "(about a minute) per run" model --seq 1M --causal --heads 160 --head-dim 128 --dtype fp32,fp16,bf16,fp8 --block-cols 128,127 --l2-bytes 60M --sms 132 --ctas-per-sm 1
timeout 60 "$real_bin" sweep --seq 1M --block-rows 256 --block-cols 256 --dtype bf16,fp8 --device h100 --progress always --format csv >/dev/null 2>"$work/l2prog"
check "L2 simulation shows progress" grep -q "hbmscope L2 simulation \[" "$work/l2prog"
expect_error "sweep shape cap" "has too many values (a sweep has at most 4000000 shapes)" sweep --seq 1:9999999:+1 --head-dim 64 --format json
expect_error "sweep past 2^64 shapes: counted, not wrapped" "sweep too large: about 2^66 shapes" sweep --seq 1:65536:+1 --head-dim 1:65536:+1 --batch 1:65536:+1 --heads 1:65536:+1 --dtype fp32,fp16,bf16,fp8
expect_error "table cap points to the streamed formats and --shard" "use --format csv, json or md (printed as the rows come), or --shard I/N" sweep --seq 1:199999:+1 --head-dim 64
# The limit sits 400 MB above what a small run needs (a CUDA build maps cuBLAS at load time).
vbase=
for v in 200000 400000 800000 1600000; do
  if (ulimit -v $v; "$real_bin" model >/dev/null 2>"$work/vprobe.err"); then vbase=$v; break; fi
done
if [ -z "$vbase" ] && grep -q "Sanitizer" "$work/vprobe.err"; then
  # AddressSanitizer reserves terabytes of address space for its shadow memory
  # and aborts on a failed allocation instead of throwing std::bad_alloc: the
  # check belongs to the plain build (the suite runs both).
  echo "SKIP: out of memory: this binary is built with AddressSanitizer, which cannot run under ulimit -v"
else
  vbase=${vbase:-3200000}
  # A table holds its rows (at most 100000, 200 MB or more with a device): with no more
  # memory than a small run needs, it runs out.
  (ulimit -v $vbase; timeout 60 "$real_bin" sweep --seq 1:99999:+1 --head-dim 64 --device h100 --l2-bytes 0 --fa1 >/dev/null 2>"$work/oom.err"; echo $? >"$work/oom.rc")
  check "out of memory: exit 1" test "$(cat "$work/oom.rc")" -eq 1
  check "out of memory: one plain line" test "$(cat "$work/oom.err")" = "hbmscope: error: out of memory (try a smaller sweep, or --shard I/N)"
fi

# Repeated values make one row each, so compare and merge read every report back.
"$bin" model --seq 64,64 --dtype bf16,bf16 --format json --output "$work/dup.json" 2>/dev/null
check "repeated values: one row" python3 -c "import json; assert len(json.load(open('$work/dup.json'))['rows'])==1"
"$bin" compare "$work/dup.json" "$work/dup.json" >/dev/null 2>&1; check "compare reads it back" test $? -eq 0
"$bin" merge "$work/dup.json" --output "$work/dupm.json" 2>/dev/null; check "merge reads it back" test $? -eq 0
echo '{"axes": {"seq": [64, 128, 64], "head_dim": 64, "causal": [true, true]}}' >"$work/cfg_dup.json"
"$bin" sweep --config "$work/cfg_dup.json" --format json --output "$work/cdup.json" 2>/dev/null
check "config repeats: first kept, in order" python3 -c "import json; r=json.load(open('$work/cdup.json'))['rows']; assert [x['shape']['seq_q'] for x in r]==[64,128], r"
"$bin" compare "$work/cdup.json" "$work/cdup.json" >/dev/null 2>&1; check "compare reads the config sweep back" test $? -eq 0

# Malformed values: one clear line each.
expect_error "empty fraction" "--bandwidth-fraction: '' is not a number" model --device h100 --bandwidth-fraction ''
expect_error "fraction digits" "1.0000001 is not in (0, 1]" model --device h100 --bandwidth-fraction 1.0000001
expect_error "empty threshold" "--threshold: '' is not a number" compare "$work/ca.json" "$work/cb.json" --threshold ''
expect_error "nan threshold" "--threshold: 'nan' is not a number" compare "$work/ca.json" "$work/cb.json" --threshold nan
expect_error "empty metric" "--metric: '' is empty" compare "$work/ca.json" "$work/cb.json" --metric ''
expect_error "negative seed" "--seed: '-1' is not an integer from 0 to 18446744073709551615" measure --seed -1
expect_error "seed too large" "--seed: '18446744073709551616' is too large" sweep --seed 18446744073709551616
expect_error "sweep --kernels without --measure" "--kernels: 'foo' is not one of" sweep --kernels foo
expect_error "sweep empty --kernels" "--kernels: '' is an empty list" sweep --kernels ''
expect_error "sweep --kernels without --measure" "--kernels: needs --measure" sweep --config seed --kernels flash
for opt in "--repeats 5" "--warmup 1" "--device-index 1" "--seed 7" "--no-validate"; do
  # shellcheck disable=SC2086
  expect_error "sweep $opt without --measure" "${opt%% *}: needs --measure" sweep --config seed $opt
done
expect_error "device index" "--device-index: '-1' is out of range (an integer from 0 to 1023)" measure --device-index -1
expect_error "delay not a number" "--delay: 'abc' is not an integer from 0 to 60000" walk --delay abc
expect_error "repeats range" "--repeats: '0' is out of range (an integer from 1 to 100000)" measure --repeats 0
expect_error "minus zero" "--seq: '-0' must be positive" model --seq=-0
expect_error "unknown command named" "unknown command 'bogus' (commands: model, sweep" bogus
bin=$real_bin

# ---- Issue 14: formats from file names, tables that fit, exit codes, L2 limits, plots ----
# --output's extension picks the format; --format wins; a contradiction is refused.
"$bin" model --output "$work/ext.json" 2>/dev/null
check "--output x.json writes JSON" python3 -c "import json; json.load(open('$work/ext.json'))"
"$bin" sweep --config seed --output "$work/ext.csv" 2>/dev/null
check "--output x.csv writes CSV" grep -q "^batch,heads,kv_heads" "$work/ext.csv"
"$bin" model --output "$work/ext.MD" 2>/dev/null
check "--output x.MD writes Markdown" grep -q "^| Sequence × head dim" "$work/ext.MD"
"$bin" model --output "$work/ext.txt" 2>/dev/null
check "--output x.txt writes a table" grep -q "^Sequence × head dim" "$work/ext.txt"
"$bin" model --format md --output "$work/ext2.txt" 2>/dev/null
check "--format md --output x.txt: Markdown" grep -q "^| Sequence" "$work/ext2.txt"
expect_error "--format contradicts --output" "--format csv contradicts --output '$work/ext3.json' (a .json file)" model --format csv --output "$work/ext3.json"
check "contradiction: nothing written" test ! -e "$work/ext3.json"
"$bin" merge "$work/ext.json" --output "$work/merged.md" 2>/dev/null
check "merge --output x.md: Markdown" grep -q "^| Sequence" "$work/merged.md"
"$bin" compare "$work/ext.json" "$work/ext.json" --output "$work/cmp.json" 2>/dev/null
check "compare --output x.json: JSON" python3 -c "import json; json.load(open('$work/cmp.json'))"
expect_error "--plot - with --output -: no json by extension check" "would be mixed into the json" model --plot - --format json

# Exit codes: 2 for a malformed command line, 1 for a valid value the model refuses.
exit_code() { "$bin" "$@" >/dev/null 2>&1; echo $?; }
check "exit 2: unknown option value" test "$(exit_code model --format xml)" -eq 2
check "exit 2: unknown --dtype" test "$(exit_code model --dtype int4)" -eq 2
check "exit 2: malformed range" test "$(exit_code model --seq 1024:2048)" -eq 2
check "exit 2: malformed list" test "$(exit_code sweep --head-dim 64,,128)" -eq 2
check "exit 2: an option without the one it needs" test "$(exit_code model --sms 132)" -eq 2
check "exit 2: --kernels without --measure" test "$(exit_code sweep --config seed --kernels flash)" -eq 2
check "exit 2: --bandwidth-fraction without --device" test "$(exit_code model --bandwidth-fraction 0.5)" -eq 2
check "exit 2: unknown option (CLI11)" test "$(exit_code model --frobnicate)" -eq 2
check "exit 2: --variants names no variant" test "$(exit_code sweep --variants flash)" -eq 2
check "exit 2: --x without --plot" test "$(exit_code model --x seq)" -eq 2
check "exit 1: a count that overflows" test "$(exit_code model --seq 8G --head-dim 128)" -eq 1
check "exit 1: heads not a multiple of kv-heads" test "$(exit_code model --heads 6 --kv-heads 4)" -eq 1
check "exit 1: no fp8 peak on the A100" test "$(exit_code model --device a100 --dtype fp8)" -eq 1

# Tables fit 120 columns by default; --wide keeps everything in one table.
maxw() { python3 -c "import sys; print(max(len(l.rstrip('\n')) for l in open(sys.argv[1], encoding='utf-8')))" "$1"; }
"$bin" model --device h100 --seq 4K,16K --head-dim 128 >"$work/w_dev"
check "device table fits 120 columns" test "$(maxw "$work/w_dev")" -le 120
check "device table: bytes, L2 and time tables" bash -c "grep -q '^HBM bytes' '$work/w_dev' && grep -q '^L2 simulation' '$work/w_dev' && grep -q '^Predicted time on H100 SXM' '$work/w_dev'"
"$bin" sweep --config llm --device h100 >"$work/w_llm" 2>/dev/null
check "llm sweep with a device fits 120 columns" test "$(maxw "$work/w_llm")" -le 120
"$bin" model --device h100 --seq 4K,16K --head-dim 128 --wide >"$work/w_wide"
check "--wide: one table with every column" bash -c "test \$(grep -c 'Sequence × head dim' '$work/w_wide') -eq 1 && grep -q 'Time: standard_l2_sim.*FLOPs.*Ridge' '$work/w_wide'"
"$bin" model --device h100 --columns time >"$work/w_cols"
check "--columns time: the time columns only" bash -c "grep -q '^Predicted time on H100 SXM' '$work/w_cols' && ! grep -q 'Standard attention\|^HBM bytes' '$work/w_cols'"
"$bin" model --columns bytes,flops >"$work/w_cols2"
check "--columns bytes,flops" bash -c "grep -q 'Standard attention' '$work/w_cols2' && grep -q 'Intensity: floor' '$work/w_cols2' && ! grep -q 'Time' '$work/w_cols2'"
expect_error "--columns: unknown group" "--columns: 'speed' is not one of bytes, l2, time, flops, all" model --columns speed
expect_error "--columns time without a device" "--columns: 'time' needs --device" model --columns time
"$bin" model --variants flash_no_l2,floor --format json >"$work/m_var.json"
check "model --variants" python3 -c "import json; r=json.load(open('$work/m_var.json'))['rows'][0]; assert sorted(r['bytes'])==['flash_no_l2','floor'], r"
"$bin" model --variants flash_no_l2 --l2-bytes 60M --format json >"$work/m_var2.json"
check "model --variants keeps flash_l2_sim with flash_no_l2" python3 -c "import json; r=json.load(open('$work/m_var2.json'))['rows'][0]; assert sorted(r['bytes'])==['flash_l2_sim','flash_no_l2'], r"
# A standard-attention row whose S and P do not fit the device is marked.
"$bin" model --device h100 --seq 128K --head-dim 128 --heads 32 --kv-heads 8 --causal >"$work/nofit" 2>/dev/null
check "no-fit: the time is marked" grep -q "(memory) †" "$work/nofit"
check "no-fit: the footnote says why" grep -q "^† needs more than the 80 GB of H100 SXM memory" "$work/nofit"
"$bin" model --device h100 --seq 128K,4K --head-dim 128 --heads 32 --kv-heads 8 --causal --format json >"$work/nofit.json" 2>/dev/null
check "no-fit in JSON" python3 -c "
import json; rows=json.load(open('$work/nofit.json'))['rows']
big=[r for r in rows if r['shape']['seq_q']==131072][0]; small=[r for r in rows if r['shape']['seq_q']==4096][0]
assert big['prediction']['standard']['fits_in_memory'] is False and big['prediction']['standard']['footprint_bytes']>80e9
assert small['prediction']['standard']['fits_in_memory'] is True
assert 'fits_in_memory' not in big['prediction']['flash_no_l2']"
"$bin" merge "$work/nofit.json" --format json >"$work/nofit_m.json" 2>/dev/null
check "no-fit survives merge" python3 -c "import json; assert json.load(open('$work/nofit_m.json'))==json.load(open('$work/nofit.json'))"

# Causal FLOPs count the visible pairs; the final count is what must fit.
"$bin" model --seq 4096 --seq-kv 1024 --head-dim 64 --causal --format json >"$work/cf.json"
check "causal FLOPs, Nq 4096 > Nkv 1024: 524,800 pairs" python3 -c "import json; assert json.load(open('$work/cf.json'))['rows'][0]['flops']==4*64*524800"
"$bin" model --seq 1M --head-dim 256 --batch 16384 --causal --format json >"$work/cf2.json" 2>/dev/null
check "FLOPs 2^63 + 2^43 fit" python3 -c "import json; assert json.load(open('$work/cf2.json'))['rows'][0]['flops']==2**63+2**43"
"$bin" model --seq 4096 --head-dim 64 --pass fwdbwd --format json >"$work/fb.json"
check "fwdbwd counts the forward's log-sum-exp write" python3 -c "
import json; b=json.load(open('$work/fb.json'))['rows'][0]['bytes']
assert b['flash_no_l2']==34603008+16384+107495424 and b['floor']==2097152+16384+4210688 and b['standard']==136314880+239075328, b"

# L2 simulation limits.
"$bin" model --device h100 --l2-bytes 0 --format json >"$work/l2zero.json"
check "--l2-bytes 0: no simulation even with --device" python3 -c "import json; r=json.load(open('$work/l2zero.json'))['rows'][0]; assert 'l2_sim' not in r and 'flash_l2_sim' not in r['bytes']"
expect_error "--l2-bytes 0 with --sms" "--sms: the L2 simulation is off (--l2-bytes 0)" model --l2-bytes 0 --sms 100
"$bin" sweep --seq 1K,64M --causal --head-dim 64 --l2-bytes 60M --format json >"$work/l2skip.json" 2>"$work/l2skip.err"
check "--l2-bytes: a shape over the cap is left out, not the run" python3 -c "
import json; rows=json.load(open('$work/l2skip.json'))['rows']; assert 'l2_sim' in rows[0] and 'l2_sim' not in rows[1]"
check "--l2-bytes: the note names the shape" grep -q "^hbmscope: note: L2 simulation left out for 1 shape(s) of more than 17179869184 work units (about 10 s each): 67108864 x 64" "$work/l2skip.err"
"$bin" model --seq 8K --head-dim 128 --heads 32 --l2-bytes 40M --l2-qo bypass --format json >"$work/qo_b.json"
"$bin" model --seq 8K --head-dim 128 --heads 32 --l2-bytes 40M --l2-qo allocate --format json >"$work/qo_a.json"
check "--l2-qo bypass: recorded, and no more traffic than allocate" python3 -c "
import json; a=json.load(open('$work/qo_a.json'))['rows'][0]; b=json.load(open('$work/qo_b.json'))['rows'][0]
assert b['l2_sim']['q_o_allocate'] is False and a['l2_sim']['q_o_allocate'] is True
assert b['bytes']['flash_l2_sim']<=a['bytes']['flash_l2_sim']"
"$bin" model --seq 8K --head-dim 128 --heads 32 --l2-bytes 40M --l2-qo bypass >"$work/qo_t"
check "--l2-qo bypass in the title" grep -q "Q and O bypass L2" "$work/qo_t"
expect_error "--l2-qo bad" "--l2-qo: 'sometimes' is not one of allocate, bypass" model --l2-bytes 1M --l2-qo sometimes
expect_error "--l2-qo without a simulation" "--l2-qo needs --l2-bytes or --device" model --l2-qo bypass

# Device presets: the README lists every id and alias `hbmscope devices` shows.
"$bin" devices >"$work/devs2"
for name in h100-sxm h100 h200 h200-sxm a100-80gb-sxm a100 b200 l40s rtx-4090 4090; do
  check "devices lists $name" grep -qw -- "$name" "$work/devs2"
  check "README names preset $name" grep -q "\`$name\`" "$src/README.md"
done
check "no device source outside the repository" bash -c "! grep -rn 'shared/\|reference.md\|the project.s H200' '$src/configs/devices' '$src/docs/devices.md'"

# Plots: --x, series instead of zig-zags, notes for what is not drawn.
if command -v gnuplot >/dev/null 2>&1; then
  "$bin" sweep --seq 1K:8K:x2 --head-dim 64,128 --plot - --x head_dim >"$work/px" 2>/dev/null
  check "--x head_dim: axis label" grep -q "head dimension d" "$work/px"
  expect_error "--x: one value on the axis" "every row has the same seq (4096)" model --seq 4096 --head-dim 64,128 --plot -
  expect_error "--x: names the axes that vary" "choose the axis with --x (head_dim vary)" model --seq 4096 --head-dim 64,128 --plot -
  expect_error "--x: bad axis" "--x: 'tokens' is not one of" model --seq 1K:4K:x2 --plot - --x tokens
  expect_error "--x without --plot" "--x: needs --plot" model --x seq
  "$bin" sweep --seq 1K:16K:x2 --head-dim 64 --heads 1,32 --device h100 --plot "$work/series.svg" >/dev/null 2>&1
  check "series plot written" grep -q "<svg" "$work/series.svg"
  "$bin" sweep --seq 4M,8M --causal --head-dim 128 --heads 32 --device h100 --plot - >"$work/pnone" 2>"$work/pnone.err"
  check "plot: a variant with no point is named in a note" grep -q "^hbmscope: note: --plot: no points for flash_l2_sim, standard_l2_sim" "$work/pnone.err"
  check "plot: and in the chart" grep -q "Note: no points for flash_l2_sim" "$work/pnone"
  check "plot: no legend entry for it" bash -c "! grep -q 'flash_l2_sim ' '$work/pnone' || grep -q 'Note: no points' '$work/pnone'"
fi

# Decode rows (issue 13): variants, ragged batches, files of lengths, walk --decode.
"$bin" model --decode --seq-kv 64K --heads 16 --kv-heads 2 --sms 108 --format json >"$work/dec.json" 2>"$work/err"
check "decode exits 0" test $? -eq 0
check "decode json" python3 -c "
import json; r=json.load(open('$work/dec.json'))['rows'][0]
assert r['shape']['decode'] is True and r['shape']['seq_q']==1, r['shape']
assert r['bytes']['decode_floor']==67117056 and r['kv_bytes']['decode_floor']==67108864, r
assert r['bytes']['decode_split']==69235584 and r['decode']['variants']['decode_split']['splits']==103, r
assert r['decode']['sm_count']==108 and 'standard' not in r['bytes'], r"
printf '512\n4096 # a comment\n128K\n' >"$work/lengths.txt"
"$bin" model --context-lengths @"$work/lengths.txt" --heads 32 --kv-heads 8 --format csv >"$work/dec.csv"
check "decode ragged from a file" grep -q "^3,32,8,1,131072,.*,true,135680,512;4096;131072,0,16,132" "$work/dec.csv"
"$bin" model --context-lengths 512,4096,128K --heads 32 --kv-heads 8 --device h200 >"$work/dec.txt"
check "decode table says memory-bound" grep -q "of the ridge point: memory-bound" "$work/dec.txt"
check "decode table shows KV bytes" grep -q "KV: decode_split" "$work/dec.txt"
"$bin" sweep --config decode --batch 1 --seq-kv 4K --format csv >"$work/decsweep.csv"
check "decode sweep config" test "$(wc -l <"$work/decsweep.csv")" -eq 3
"$bin" walk --decode --seq-kv 5000 --variant decode_paged --page-size 7 --splits 3 >"$work/decwalk" 2>"$work/err"
check "walk --decode piped: final frame" grep -q "Total (decode_paged)  *2,569,540 B  of  2,569,540 B" "$work/decwalk"
check "walk --decode: no escapes when piped" bash -c "! grep -q $'\x1b' '$work/decwalk'"
expect_error "decode seq over 8" "1 to 8 new tokens" model --decode --seq 9 --seq-kv 100
expect_error "decode without context" "give the context length" model --decode
expect_error "splits without decode" "--splits: applies to decode rows" model --splits 4
expect_error "context lengths file missing" "--context-lengths: cannot read" model --context-lengths @"$work/none.txt"
expect_error "context lengths with batch" "drop --batch and --seq-kv" model --context-lengths 1,2 --batch 2
expect_error "walk decode floor" "--variant: 'decode_floor' is not one of" walk --decode --seq-kv 100 --variant decode_floor
expect_error "walk --sms without decode" "--sms: applies to walk --decode" walk --sms 4
"$bin" model --decode --seq-kv 4K,32K --heads 32 --kv-heads 8 --format json --output "$work/dca.json" 2>/dev/null
"$bin" model --decode --seq-kv 4K,32K --heads 32 --kv-heads 8 --sms 16 --format json --output "$work/dcb.json" 2>/dev/null
"$bin" compare "$work/dca.json" "$work/dcb.json" >"$work/dcmp"
check "compare decode reports: verdict on decode_split" grep -qi "verdict on bytes.decode_split" "$work/dcmp"
expect_error "decode --l2-order" "--l2-order: decode rows are simulated" model --decode --seq-kv 4K --l2-bytes 1M --l2-order head-major
expect_error "decode --fa1" "--fa1: decode rows have their own variants" model --decode --seq-kv 100 --fa1
if command -v script >/dev/null 2>&1; then
  timeout 60 script -qec "'$bin' walk --decode --seq-kv 64K --heads 16 --kv-heads 2 --splits 6 --delay 1" /dev/null >"$work/decwalk_tty" 2>&1
  check "walk --decode animates and ends" test $? -eq 0
  check "walk --decode animation reaches the total" grep -aq "the combine kernel read the 6 fp32 partials" "$work/decwalk_tty"
fi

echo "$pass passed, $fails failed"
test "$fails" -eq 0
