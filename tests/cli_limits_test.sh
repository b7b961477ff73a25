#!/usr/bin/env bash
# Users' JSON files, limits on bad or huge input, formats from file names, tables
# that fit, exit codes, L2 limits, plots and decode rows on the command line.
source "$(dirname "$0")/lib.sh"
src=$(cd "$(dirname "$0")/.." && pwd)
# Reports to spoil and to compare.
"$bin" sweep --seq 1K:8K:x2 --device h100 --format json --output "$work/c100.json" 2>/dev/null
"$bin" sweep --seq 1K:8K:x2 --format json --output "$work/ca.json" 2>/dev/null
"$bin" sweep --seq 2K:16K:x2 --format json --output "$work/cb.json" 2>/dev/null
"$bin" sweep --config llm --shard 1/2 --format json --output "$work/h1.json" 2>/dev/null
# (--l2-bytes 0 where the L2 simulation is not what a check is about: under the
# sanitizers the 128K-token causal rows cost about 30 s a sweep.)
"$bin" sweep --config llm --shard 2/2 --device h100 --l2-bytes 0 --format json --output "$work/h2dev.json" 2>/dev/null

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
"$bin" sweep --config llm --shard 1/2 --device h100 --bandwidth-fraction 0.5 --l2-bytes 0 --format json --output "$work/f5.json" 2>/dev/null
"$bin" sweep --config llm --shard 2/2 --device h100 --bandwidth-fraction 0.8 --l2-bytes 0 --format json --output "$work/f8.json" 2>/dev/null
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
expect_error "l2 per-shape cap says how" "use bigger --block-rows/--block-cols, fewer heads or a shorter sequence" model --seq 64M --causal --heads 16 --l2-bytes 60M
# (A window in head-major order: the engine alone, which does not take 4.2 M CTAs; causal without a
# window goes by rows in either order.)
expect_error "l2 per-shape cap: head-major's masked backward names query-block-major where it fits" "use --l2-order query-block-major (within the budget there)" model --seq 1M --heads 64 --kv-heads 8 --batch 8 --causal --window 4096 --pass bwd --l2-bytes 60M --sms 132 --ctas-per-sm 1 --l2-order head-major
timeout 20 "$real_bin" model --seq 1M --heads 64 --kv-heads 8 --batch 8 --causal --window 4096 --pass bwd --device h100 --l2-order head-major --format csv >/dev/null 2>"$work/hm.err"
check "head-major masked backward left out: the note names query-block-major" grep -q "(--l2-order query-block-major, bigger" "$work/hm.err"
check "a shape over the cap in either order: no order named" sh -c "! grep -q 'l2-order query-block-major' '$work/huge.err'"
expect_error "l2 per-shape cap, enumerated" "(enumeration) would take" model --seq 64K --causal --block-rows 1 --block-cols 1 --l2-bytes 60M --l2-method enumeration
expect_error "enumeration's cap: runs named where they would do" "about 10 s); use --l2-method runs, or bigger" model --seq 1M --heads 64 --batch 16 --pass bwd --l2-bytes 60M --l2-method enumeration
# (A causal row of 2^28 objects is refused by its work first: the enumeration's
# accesses count up to five times as its objects outgrow the caches.)
expect_error "backward enumeration past the caches: blocks named for a causal row" "work units (at most 17179869184, about 10 s); use bigger --block-rows/--block-cols" model --seq 64M --seq-kv 128 --block-rows 1 --causal --pass bwd --l2-bytes 60M
expect_error "backward enumeration's object cap: runs named where the waves take the row" "objects (at most 268435456); use --l2-method runs" model --seq 64M --seq-kv 128 --block-rows 1 --pass bwd --l2-bytes 60M --l2-method enumeration
expect_error "enumeration's cap: runs not named where they enumerate too" "about 10 s); use bigger --block-rows/--block-cols" model --seq 64K --heads 64 --batch 16 --causal --pass bwd --block-rows 1 --block-cols 1 --l2-bytes 60M --l2-method enumeration
expect_error "l2 per-run cap" "(about a minute) per run" model --seq 1M --causal --heads 64 --kv-heads 8 --batch 8 --head-dim 128 --dtype fp32,fp16,bf16,fp8 --block-cols 128,127,126,125 --l2-bytes 60M --sms 132 --ctas-per-sm 1 --l2-order head-major
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
"$bin" model --device h100 --seq 4K,16K --head-dim 128 >"$work/w_dev"
check "device table fits 120 columns" test "$(maxw "$work/w_dev")" -le 120
check "device table: bytes, L2 and time tables" bash -c "grep -q '^HBM bytes' '$work/w_dev' && grep -q '^L2 simulation' '$work/w_dev' && grep -q '^Predicted time on H100 SXM' '$work/w_dev'"
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
"$bin" model --device h100 --seq 128K --head-dim 128 --heads 32 --kv-heads 8 --causal --l2-bytes 0 >"$work/nofit" 2>/dev/null
check "no-fit: the time is marked" grep -q "(memory) †" "$work/nofit"
check "no-fit: the footnote says why" grep -q "^† needs more than the 80 GB of H100 SXM memory" "$work/nofit"
"$bin" model --device h100 --seq 128K,4K --head-dim 128 --heads 32 --kv-heads 8 --causal --l2-bytes 0 --format json >"$work/nofit.json" 2>/dev/null
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
"$bin" sweep --seq 1K,64M --causal --heads 16 --head-dim 64 --l2-bytes 60M --format json >"$work/l2skip.json" 2>"$work/l2skip.err"
check "--l2-bytes: a shape over the cap is left out, not the run" python3 -c "
import json; rows=json.load(open('$work/l2skip.json'))['rows']; assert 'l2_sim' in rows[0] and 'l2_sim' not in rows[1]"
check "--l2-bytes: the note names the shape" grep -q "^hbmscope: note: L2 simulation left out for 1 shape(s) of more than 17179869184 work units (about 10 s each): 67108864 x 64" "$work/l2skip.err"
# Backward rows without a mask: waves in closed form at any size (1M x 64/8 x batch 8, both orders);
# causal backward rows by rows (1M x 8/2: 0.4 s, where the enumeration takes 12 s and gives the same
# figures), and left out past the cap with a note (1M x 64/8 x batch 8 with a window in head-major
# order: the segment engine does not take 4.2 M CTAs, and by rows takes head-major order causal or
# ragged only; causal, in either order, at d = 64 to 256 and on every preset, it goes by rows in
# 0.4 to 2.5 s).
for order in query-block-major head-major; do
  "$bin" sweep --seq 1M --heads 64 --kv-heads 8 --batch 8 --pass bwd,fwdbwd --l2-order $order --device h100 \
    --format json >"$work/bwd1m.json" 2>"$work/bwd1m.err"
  check "backward 1M x 64/8 x batch 8 without a mask, $order: simulated" python3 -c "
import json; rows=json.load(open('$work/bwd1m.json'))['rows']; assert len(rows)==2 and all('l2_sim' in r for r in rows), rows"
  check "backward 1M without a mask, $order: no note" test ! -s "$work/bwd1m.err"
done
"$bin" sweep --seq 1M --heads 8 --kv-heads 2 --causal --pass bwd --device h100 --format json >"$work/bwd1mc.json" 2>"$work/bwd1mc.err"
check "causal backward 1M x 8/2: simulated" python3 -c "
import json; rows=json.load(open('$work/bwd1mc.json'))['rows']; assert len(rows)==1 and 'l2_sim' in rows[0], rows"
check "causal backward 1M x 8/2: no note" test ! -s "$work/bwd1mc.err"
"$bin" sweep --seq 1M --heads 64 --kv-heads 8 --batch 8 --causal --window 4096 --pass bwd --device a100 --l2-order head-major --format json >"$work/bwd1mc.json" 2>"$work/bwd1mc.err"
check "causal backward 1M x 64/8 x batch 8: left out with a note" grep -q "left out for 1 shape(s).*causal, window 4096, backward" "$work/bwd1mc.err"
check "causal backward 1M x 64/8 x batch 8: the note says why" grep -q "backward rows with a mask or a ragged batch have no closed form" "$work/bwd1mc.err"
# The backward grid keeps its counts in 32 bits; a key block of more than 2^32 keys is simulated all the same.
"$bin" model --seq 128 --seq-kv 5000000000 --block-cols 5000000000 --head-dim 64 --pass bwd --causal --l2-bytes 60M \
  --sms 1 --format json >"$work/bwd_wide.json"
check "causal backward, a key block of 5e9 keys: simulated" python3 -c "
import json; r=json.load(open('$work/bwd_wide.json'))['rows'][0]; assert 'flash_l2_sim' in r['bytes'], r"
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
  "$bin" sweep --seq 12M,16M --causal --head-dim 128 --heads 128 --device h100 --plot - >"$work/pnone" 2>"$work/pnone.err"
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

finish
