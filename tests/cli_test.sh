#!/usr/bin/env bash
# The command line as a user meets it: output, exit codes, one-line errors on
# stderr with nothing on stdout, and no half-written report files (continued in
# cli_sweep_test.sh and cli_limits_test.sh).
source "$(dirname "$0")/lib.sh"


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
expect_error "l2 sim too large" "work units" model --seq 64M --causal --heads 16 --head-dim 64 --l2-bytes 1M
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
"$bin" sweep --seq 16M --causal --head-dim 128 --heads 128 --device h200 --format csv >"$work/big.csv" 2>"$work/big.err"
check "--device skips shapes too large to simulate, with a note" grep -q "L2 simulation left out for 1 shape" "$work/big.err"
expect_error "a failing run prints its error alone, no note" "--variants: 'flash_l2_sim' is not a variant of these rows" sweep --seq 16M --causal --head-dim 64 --heads 128 --device h100 --variants flash_l2_sim
"$bin" sweep --seq 4096 --head-dim 64 --pass fwd,bwd --fa1 --format json >"$work/passes.json"
check "sweep --pass and --fa1" python3 -c "import json; rows=json.load(open('$work/passes.json'))['rows']; assert [r['shape']['pass'] for r in rows]==['fwd','bwd']; assert rows[0]['bytes']['flash1_no_l2']==54034432"
# long-context's variant filter on shorter sequences (its 1M rows take minutes under the sanitizers).
cat >"$work/lc.json" <<'EOF'
{"schema": "hbmscope.sweep/1", "axes": {"seq": "4K:16K:x2", "head_dim": 128, "heads": 32, "kv_heads": 8,
 "causal": true}, "variants": ["flash_no_l2", "floor"]}
EOF
"$bin" sweep --config "$work/lc.json" --device b200 >"$work/lc" 2>/dev/null
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

finish
