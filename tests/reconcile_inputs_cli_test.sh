#!/usr/bin/env bash
# `hbmscope reconcile` on every form of measured input as a user meets it
# (issue 18: ncu 2021 pages, console text, Nsight Systems traces and NVTX
# reports, decode calls), and the reconcile reproducers of issue 22 (raw names,
# a second header, a byte-order mark, text after a quote, repeated IDs, a
# denormal duration, a file given twice, an option product, the L2 budget).
# Fixtures: tests/fixtures/ncu (constructed).
source "$(dirname "$0")/lib.sh"
fx=$(cd "$(dirname "$0")" && pwd)/fixtures/ncu

# ncu 2021 details page: dram__bytes.sum, time from cycles, cast-style names.
"$bin" reconcile "$fx/details_2021_fa1.csv" --seq 32 --head-dim 64 --batch 2 --heads 12 --dtype fp16 --device a100 \
  >"$work/t" 2>"$work/e"
check "2021 fa1: exit 0" test $? -eq 0
check "2021 fa1: one flash call at the floor" grep -qE "^ +1 +flash +fmha_fwd_loop_kernel .* AT FLOOR$" "$work/t"
check "2021 fa1: read+write counted" grep -q "Read+write counted" "$work/t"
check "2021 fa1: derived time marked" grep -q "~9.36 µs" "$work/t"
check "2021 fa1: reads and total" grep -q "1.00× the floor's reads, 0.753× its total" "$work/t"
check "2021 fa1: GEMM and its split-K reduction outside" grep -q "splitKreduce_kernel (gemm_reduce) × 1" "$work/t"
"$bin" reconcile "$fx/details_2021_standard.csv" --seq 20 --head-dim 32 --batch 2 --heads 8 --dtype fp32 >"$work/t" 2>&1
check "2021 standard: three kernels, MATCHES" grep -qE "GEMM, softmax, GEMM \(3 kernels\) .* MATCHES$" "$work/t"
"$bin" reconcile "$fx/raw_2021.csv" --seq 32 --head-dim 64 --batch 2 --heads 12 --dtype fp16 >"$work/t" 2>&1
check "2021 raw: read" grep -q "AT FLOOR" "$work/t"

# --columns all: every variant's ratio, the L2 hit rate, the grid and split count.
"$bin" reconcile "$fx/console_vllm_decode.txt" --seq 1 --seq-kv 16384 --heads 32 --head-dim 128 --dtype fp16 \
  --device 4090 --columns all >"$work/t" 2>"$work/e"
check "console: exit 0" test $? -eq 0
check "console: split_kv call of two kernels" grep -qE "^ +1 +split_kv +vllm::paged_attention_v2_kernel \+1" "$work/t"
check "console: splits from the grid" grep -q "32 (launch grid)" "$work/t"
check "console: a ratio per variant" grep -q "Counted / decode_split_unpacked" "$work/t"
check "console: L2 hit rate" grep -q "L2 hit (counted)" "$work/t"
check "console: judged against decode_paged" grep -qE "× decode_paged .* MATCHES$" "$work/t"
"$bin" reconcile "$fx/console_vllm_decode.txt" --seq 1 --seq-kv 16384 --heads 32 --head-dim 128 --dtype fp16 \
  --format csv >"$work/c.csv" 2>/dev/null
check "csv: every variant's ratio" python3 -c "
import csv; r = list(csv.DictReader(open('$work/c.csv')))
assert float(r[0]['model_decode_paged_counted_over_reads']) > 0.9, r[0]
assert r[0]['model_decode_split_unpacked_counted_over_reads'] != '' and r[0]['splits'] == '32'"

# Nsight Systems: a decode loop's trace with its NVTX ranges, given together.
"$bin" reconcile "$fx/nsys_decode_trace.csv" "$fx/nsys_decode_nvtx.csv" --device h200 --format json \
  --output "$work/n.json" 2>"$work/e"
check "nsys: written" grep -q "wrote" "$work/e"
check "nsys: three decode calls from NVTX shapes, 4 splits from the grid" python3 -c "
import json; d = json.load(open('$work/n.json')); calls = d['reconcile']['calls']
assert len(calls) == 3, len(calls)
assert all(c['shape_from'] == 'nvtx' and c['splits'] == 4 and c['splits_from'] == 'launch grid' for c in calls)
assert [i['format'] for i in d['reconcile']['inputs']] == ['nsys-trace', 'nsys-nvtx']"
check "nsys: memory copies noted" grep -q "2 memory copies and sets left out" "$work/e"
"$bin" reconcile "$fx/nsys_trace_2023.csv" --seq 4096 --head-dim 64 --batch 2 --heads 16 >"$work/t" 2>"$work/e"
check "nsys 2023: a contradicting grid is one warning" test "$(grep -c "warning: call 1: the launch grid (32, 4, 16)" "$work/e")" -eq 1
expect_exit "nvtx alone" 1 "only NVTX ranges" reconcile "$fx/nsys_decode_nvtx.csv"
expect_exit "nsys summary" 1 "a summary report" reconcile "$fx/bad/nsys_summary.csv"

# B200 raw page: decode calls of three libraries, times only.
"$bin" reconcile "$fx/raw_b200_decode.csv" --decode --seq-kv 32768 --batch 8 --heads 32 --kv-heads 8 --head-dim 128 \
  --device b200 --splits 4 >"$work/t" 2>&1
check "b200: three split_kv calls" grep -q "^3 attention call(s) from 7 launch(es)" "$work/t"
check "b200: the cut combine stays outside" grep -q "flash_fwd_splitkv_combine_kernel (split_kv_combine) × 1" "$work/t"
check "b200: --splits named" grep -q "4 split(s) from --splits" "$work/t"

"$bin" reconcile "$fx/raw_two_captures.csv" --seq 4096 --head-dim 64 --batch 4 --heads 16 --splits 4 >/dev/null 2>"$work/e"
check "--splits without a decode call: said" grep -q "note: --splits: no decode call in the inputs; it did nothing" "$work/e"

# Nothing profiled, or an application that failed: one line saying so.
expect_exit "prof only" 1 "no kernel was profiled" reconcile "$fx/bad/prof_only.txt"
expect_exit "prof error" 1 "the profiler reported an error" reconcile "$fx/bad/prof_error.txt"

# Issue 22's reproducers.
expect_exit "text after a closing quote" 1 "text after a closing quote" reconcile "$fx/bad/after_quote.csv"
expect_exit "repeated launch IDs" 1 "launch ID 0 of process '1' again" reconcile "$fx/bad/duplicate_ids.csv"
expect_exit "denormal duration" 1 "is not a kernel's duration" reconcile "$fx/bad/denormal_duration.csv"
"$bin" reconcile "$fx/raw_two_captures.csv" --seq 4096 --head-dim 64 --batch 4 --heads 16 >"$work/t" 2>"$work/e"
check "second header with its units row: read" grep -q "^2 attention call(s) from 2 launch(es)" "$work/t"
printf '\xEF\xBB\xBF' >"$work/bom.csv"
sed -n '/^"ID"/,$p' "$fx/raw_two_captures.csv" >>"$work/bom.csv"
"$bin" reconcile "$work/bom.csv" >"$work/t" 2>&1
check "byte-order mark: the header is found" grep -q "^2 attention call(s)" "$work/t"
# Kernel names with terminal escapes: escaped in every format.
{ sed -n '2,3p' "$fx/bad/duplicate_ids.csv"
  printf '"0","1","p","h","flash_fwd_kernel\033]0;owned\007\r<T>","1","7","(128, 1, 1)","(32, 4, 16)","0","9.0","1","2","3"\n'
} >"$work/esc.csv"
for fmt in table md csv; do
  "$bin" reconcile "$work/esc.csv" --format $fmt >"$work/t" 2>&1
  check "escaped name ($fmt)" test "$(tr -d '\n' <"$work/t" | LC_ALL=C grep -c $'[\x01-\x08\x0b-\x1f\x7f]')" -eq 0
  check "escape shown ($fmt)" grep -q '\\x1b' "$work/t"
done
# The same file twice (by device and inode), or standard input twice.
cp "$fx/raw_two_captures.csv" "$work/a.csv"
ln -s "$work/a.csv" "$work/b.csv"
expect_exit "same file twice" 2 "is given twice" reconcile "$work/a.csv" "$work/a.csv"
expect_exit "same file by another name" 2 "(also as '$work/a.csv')" reconcile "$work/a.csv" "$work/b.csv"
expect_exit "stdin twice" 2 "given twice" reconcile - -
many=()
for _ in $(seq 4900); do many+=("$work/a.csv"); done
start=$(date +%s)
expect_exit "a file 4,900 times" 2 "is given twice" reconcile "${many[@]}"
check "a file 4,900 times: refused at once" test $(($(date +%s) - start)) -lt 10
# An option product much larger than the calls: counted, not built.
start=$(date +%s)
( ulimit -v 1048576; "$bin" reconcile "$fx/raw_two_captures.csv" --seq 4096 --head-dim 64 --heads 151:250:+1 \
    --seq-kv 1:1000000:+1 >"$work/out" 2>"$work/err" ); rc=$?
check "option product: refused (exit 1)" test "$rc" -eq 1
check "option product: names the count" grep -q "100000000 shapes given for 2 attention call(s)" "$work/err"
check "option product: at once" test $(($(date +%s) - start)) -lt 20
# A ragged batch of a million sequences is one shared list, whatever the calls.
start=$(date +%s)
( ulimit -v 1048576; "$bin" reconcile "$fx/raw_two_captures.csv" --context-lengths 1:1000000:+1 --heads 32 --kv-heads 8 \
    --head-dim 128 >"$work/out" 2>"$work/err" ); rc=$?
check "a million context lengths: exit 0" test "$rc" -eq 0
check "a million context lengths: two decode calls" grep -q "^2 attention call(s)" "$work/out"
check "a million context lengths: at once" test $(($(date +%s) - start)) -lt 20
expect_exit "--splits as a list" 2 "--splits: reconcile takes one value" reconcile "$fx/raw_two_captures.csv" \
  --context-lengths 1:1000000:+1 --splits 1:100:+1
# The L2 simulation within the run's budget (sweep's rule): 100 calls of shapes
# over the per-shape budget (causal at 1M tokens: enumerated) are left out at
# once, with sweep's note; the same calls without a mask take the simulation's
# closed form and are all simulated at once.
{ echo '"ID","Kernel Name","dram__bytes_read.sum","gpu__time_duration.sum"'
  echo '"","","byte","nsecond"'
  for i in $(seq 0 99); do echo "\"$i\",\"flash_fwd_kernel\",\"1000\",\"2000\""; done
} >"$work/hundred.csv"
check "hundred: about 4 kB" test "$(stat -c %s "$work/hundred.csv")" -lt 5000
start=$(date +%s)
timeout 120 "$bin" reconcile "$work/hundred.csv" --heads 151:250:+1 --seq 16M --causal --head-dim 64 --device h100 \
  >"$work/t" 2>"$work/e"
check "L2 budget: exit 0" test $? -eq 0
check "L2 budget: sweep's note" grep -q "L2 simulation left out for 100 shape(s) of more than" "$work/t"
check "L2 budget: quick" test $(($(date +%s) - start)) -lt 60
start=$(date +%s)
timeout 120 "$bin" reconcile "$work/hundred.csv" --heads 151:250:+1 --seq 65536 --head-dim 64 --device h100 \
  >"$work/t" 2>"$work/e"
check "L2 closed form: exit 0" test $? -eq 0
check "L2 closed form: every call simulated" test "$(grep -c "the L2 simulation predicted" "$work/t")" -eq 100
check "L2 closed form: nothing left out" eval '! grep -q "L2 simulation left out" "$work/t"'
check "L2 closed form: quick" test $(($(date +%s) - start)) -lt 60

echo "reconcile inputs cli: $pass passed, $fails failed"
test "$fails" -eq 0
