#!/usr/bin/env bash
# `hbmscope reconcile` as a user meets it: the fixtures of tests/fixtures/ncu
# (constructed from the documented Nsight Compute formats), one-line errors,
# non-zero exits, no half-written files, and a 1 GB input read in a stream.
set -u
bin=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
fx=$(cd "$(dirname "$0")" && pwd)/fixtures/ncu
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fails=0
pass=0

check() {  # check NAME CONDITION...
  local name=$1; shift
  if "$@"; then pass=$((pass + 1)); else echo "FAIL: $name"; fails=$((fails + 1)); fi
}

# expect_error NAME 'stderr substring' ARGS...: non-zero exit, one stderr line, empty stdout, no --output file
expect_error() {
  local name=$1 want=$2; shift 2
  rm -f "$work/report.json"
  "$bin" "$@" >"$work/out" 2>"$work/err"
  local rc=$?
  check "$name: non-zero exit" test "$rc" -ne 0
  check "$name: stdout empty" test ! -s "$work/out"
  check "$name: one stderr line" test "$(wc -l <"$work/err")" -eq 1
  check "$name: no report file" test ! -e "$work/report.json"
  if ! grep -qF -- "$want" "$work/err"; then
    echo "FAIL: $name: stderr lacks '$want': $(cat "$work/err")"; fails=$((fails + 1))
  else pass=$((pass + 1)); fi
}

shape=(--seq 4096 --head-dim 64 --batch 4 --heads 16)

# The README example: PyTorch SDPA's backends in one raw-page capture.
"$bin" reconcile "$fx/raw_sdpa.csv" "${shape[@]}" --device h200 >"$work/t" 2>"$work/e"
check "sdpa: exit 0" test $? -eq 0
check "sdpa: 4 calls" grep -q "^4 attention call(s) from 10 launch(es)" "$work/t"
check "sdpa: flash at the floor" grep -qE "^ +1 +flash +pytorch_flash::flash_fwd_kernel .* AT FLOOR$" "$work/t"
check "sdpa: standard call of three kernels" grep -qE "^ +4 +standard +GEMM, softmax, GEMM \(3 kernels\)" "$work/t"
check "sdpa: unmatched kernel listed" grep -q "my_custom_attention_kernel(float const\*, float\*) × 1" "$work/t"
check "sdpa: writes caveat" grep -q "writes are reported, not judged" "$work/t"
check "sdpa: stderr quiet" test ! -s "$work/e"
"$bin" reconcile --help >"$work/h"
check "help: NVTX example" grep -q 'torch.cuda.nvtx.range_push("hbmscope:seq=4096' "$work/h"
check "help: capture command" grep -q "ncu --csv --page raw" "$work/h"

# JSON report: schema /2, read back by compare and merge.
"$bin" reconcile "$fx/raw_sdpa.csv" "${shape[@]}" --device h200 --format json --output "$work/r.json" 2>"$work/e"
check "json: written" grep -q "wrote" "$work/e"
check "json: schema 2" python3 -c "import json; d=json.load(open('$work/r.json')); assert d['schema']=='hbmscope.report/3'; assert d['rows'][0]['call']['verdict']=='AT FLOOR'; assert len(d['reconcile']['calls'])==4"
"$bin" compare "$work/r.json" "$work/r.json" >"$work/c" 2>&1
check "compare reads a reconcile report" grep -q "4 rows matched" "$work/c"
"$bin" --seq 1024 --format json >"$work/m2.json"
python3 -c "import json; d=json.load(open('$work/m2.json')); d['schema']='hbmscope.report/1'; json.dump(d,open('$work/m1.json','w'))"
"$bin" compare "$work/m1.json" "$work/m2.json" >"$work/c" 2>&1
check "compare: /1 against /2" grep -q "1 rows matched" "$work/c"
"$bin" merge "$work/m1.json" >"$work/mm.json" 2>&1
check "merge: a /1 report comes out /3" python3 -c "import json; assert json.load(open('$work/mm.json'))['schema']=='hbmscope.report/3'"

# CSV and Markdown.
"$bin" reconcile "$fx/raw_sdpa.csv" "${shape[@]}" --format csv >"$work/r.csv"
check "csv: header + 4 lines" test "$(wc -l <"$work/r.csv")" -eq 5
check "csv: parses" python3 -c "import csv; r=list(csv.DictReader(open('$work/r.csv'))); assert r[0]['read_bytes']=='101187584' and r[3]['kind']=='standard'"
"$bin" reconcile "$fx/raw_sdpa.csv" "${shape[@]}" --format md >"$work/r.md"
check "md: table" grep -q "^| Call | Kind |" "$work/r.md"

# The vLLM decode data point (details page): 268 MB of KV in 272 µs, 0.986 TB/s.
"$bin" reconcile "$fx/details_vllm_decode.csv" --seq 1 --seq-kv 16384 --heads 32 --head-dim 128 --dtype fp16 \
  --device 4090 >"$work/v" 2>&1
check "vllm: split_kv call" grep -qE "^ +1 +split_kv +vllm::paged_attention_v2_kernel" "$work/v"
check "vllm: 992 GB/s (decode_paged, 32 splits)" grep -q "992 GB/s" "$work/v"
check "vllm: 272 µs" grep -q "272 µs" "$work/v"
check "vllm: 268 MB floor" grep -q "268 MB" "$work/v"

# Other forms: old headers, NVTX shapes, grouping, timings.
for f in raw_old_header.csv details_old_header.csv raw_grouping.csv; do
  "$bin" reconcile "$fx/$f" "${shape[@]}" >"$work/o" 2>&1
  check "$f: exit 0" test $? -eq 0
done
"$bin" reconcile "$fx/raw_nvtx.csv" >"$work/n" 2>&1
check "nvtx: shapes from ranges" grep -q "4096 × 4096 d128 b4 h32/8 bf16 causal" "$work/n"
"$bin" reconcile "$fx/timings.csv" "$fx/sdpa_timings.json" >"$work/tm" 2>"$work/e"
check "timings: 5 calls" grep -q "^5 attention call(s)" "$work/tm"
check "timings: skipped result noted" grep -q "1 skipped result(s) left out" "$work/e"
cat "$fx/raw_sdpa.csv" | "$bin" reconcile - "${shape[@]}" >"$work/s" 2>&1
check "stdin: read" grep -q "^4 attention call(s)" "$work/s"
"$bin" reconcile "$fx/raw_sdpa.csv" >"$work/ns" 2>&1
check "no shape: said" grep -q "NO SHAPE" "$work/ns"

# Bad input: one line, non-zero exit, nothing written.
expect_error "truncated" "ends inside a quoted field" reconcile "$fx/bad/truncated.csv" "${shape[@]}" --output "$work/report.json"
expect_error "truncated row" "(truncated?)" reconcile "$fx/bad/truncated_row.csv" --output "$work/report.json"
expect_error "not csv" "no Nsight Compute CSV header" reconcile "$fx/bad/not_csv.txt" --output "$work/report.json"
expect_error "no metric columns" "none of the metric columns" reconcile "$fx/bad/no_metrics.csv" --output "$work/report.json"
expect_error "header only" "a header and no kernel launches" reconcile "$fx/bad/header_only.csv" --output "$work/report.json"
expect_error "duplicate columns" "duplicate column 'dram__bytes_read.sum'" reconcile "$fx/bad/duplicate_columns.csv"
expect_error "ambiguous number" "ambiguous_number.csv:4: column 'dram__bytes_read.sum': ambiguous number" \
  reconcile "$fx/bad/ambiguous_number.csv" --output "$work/report.json"
expect_error "bad unit" "unit 'furlong'" reconcile "$fx/bad/bad_unit.csv"
expect_error "binary garbage" "binary data" reconcile "$fx/bad/garbage.bin" --output "$work/report.json"
expect_error "missing file" "cannot read" reconcile "$work/nope.csv"
expect_error "a directory" "is a directory" reconcile "$work"
expect_error "shape list of the wrong length" "3 shapes given for 4 attention call(s)" \
  reconcile "$fx/raw_sdpa.csv" --seq 1024,2048,4096 --head-dim 64
expect_error "seq without head dim" "--seq (or --seq-lens) and --head-dim (or --mla)" reconcile "$fx/raw_sdpa.csv" --seq 1024
# Attention as served from the options; --window alone is not applied to NVTX shapes; no whole model.
expect_error "window alone" "--seq (or --seq-lens) and --head-dim" reconcile "$fx/raw_sdpa.csv" --window 512 --causal
expect_error "--model-config" "--model-config: reconcile puts each kernel call beside one shape" reconcile "$fx/raw_sdpa.csv" --model-config gemma-3-27b
"$bin" reconcile "$fx/raw_sdpa.csv" --seq-lens 512,4K --head-dim 64 --heads 16 --causal --window 1024 --kv-dtype fp8 --format json --output "$work/served.json" 2>/dev/null
check "served options give the calls' shape" python3 -c "
import json; d=json.load(open('$work/served.json'))
for r in d['rows']:
    s=r['shape']; assert s['window']==1024 and s['kv_dtype']=='fp8' and s['seq_lens']==[[512,512],[4096,4096]] and s['batch']==2, s"
"$bin" reconcile "$fx/details_vllm_decode.csv" --decode --seq-kv 16384 --heads 128 --mla 512,64 --format json --output "$work/mla.json" 2>/dev/null
check "--mla stands for --head-dim" python3 -c "
import json; d=json.load(open('$work/mla.json')); s=d['rows'][0]['shape']
assert s['latent_kv'] and s['head_dim']==576 and s['head_dim_v']==512 and s['kv_heads']==1, s"
expect_error "pass refused" "--pass" reconcile "$fx/raw_sdpa.csv" --seq 1024 --head-dim 64 --pass bwd
echo '{"kernels":[{"match":"x","role":"fast"}]}' >"$work/badk.json"
expect_error "bad kernel table" "kernels[0].role" reconcile "$fx/raw_sdpa.csv" --kernel-table "$work/badk.json"
sed 's/hbmscope:seq=4096,d=128/hbmscope:seq=4096,dd=128/' "$fx/raw_nvtx.csv" >"$work/badnvtx.csv"
expect_error "bad GQA options" "multiple of kv-heads" reconcile "$fx/raw_nvtx.csv" --seq 1 --head-dim 64 --heads 3 --kv-heads 2
expect_error "bad NVTX key" "unknown key 'dd'" reconcile "$work/badnvtx.csv"

cp "$fx/raw_sdpa.csv" "$work/in.csv"
expect_error "output is an input" "--output: '$work/in.csv' is also an input" reconcile "$work/in.csv" --output "$work/in.csv"
check "output is an input: input intact" cmp -s "$fx/raw_sdpa.csv" "$work/in.csv"

# A user's kernel table classifies the unknown kernel.
echo '{"kernels":[{"match":"my_custom_attention","role":"flash_fwd","source":"mine"}]}' >"$work/k.json"
"$bin" reconcile "$fx/raw_sdpa.csv" "${shape[@]}" --kernel-table "$work/k.json" >"$work/k" 2>&1
check "user table: the custom kernel is a call" grep -qE "^ +1 +flash +my_custom_attention_kernel" "$work/k"

# A 1 GB input is read in a stream: under a 512 MB address-space limit the
# run still ends (here with a clean error at the last, truncated row).
big=$work/big.csv
{
  echo '"ID","Kernel Name","dram__bytes_read.sum","gpu__time_duration.sum","pad"'
  echo '"","","byte","nsecond",""'
  pad=$(head -c 4000 /dev/zero | tr '\0' 'x')
  # Each launch its own ID (a launch met twice in one capture is refused).
  seq 1 400000 | awk -v pad="$pad" '{ printf "\"%d\",\"my_kernel\",\"1000\",\"2000\",\"%s\"\n", $1, pad }' |
    head -c $((1 << 30))
} >"$big" 2>/dev/null
check "1 GB file made" test "$(stat -c %s "$big")" -gt $((1 << 30))
( ulimit -v 524288; "$bin" reconcile "$big" >"$work/out" 2>"$work/err" ); rc=$?
check "1 GB: exit 1" test "$rc" -eq 1
check "1 GB: one line naming the last row" grep -q "big.csv:[0-9]*: the input ends inside a quoted field" "$work/err"
rm -f "$big"

# --plot: counted against model reads, drawn by gnuplot (where it is installed).
if command -v gnuplot >/dev/null; then
  "$bin" reconcile "$fx/raw_sdpa.csv" "${shape[@]}" --plot "$work/reads.svg" >/dev/null 2>&1
  check "plot: svg written" grep -q "counted reads" "$work/reads.svg"
  expect_error "plot: nothing to plot" "nothing to plot" reconcile "$fx/raw_sdpa.csv" --plot "$work/none.svg"
fi

# The README's example is this binary's output on the fixture.
root=$(cd "$(dirname "$0")/.." && pwd)
( cd "$root" && "$bin" reconcile tests/fixtures/ncu/raw_sdpa.csv "${shape[@]}" --device h200 ) >"$work/readme-now" 2>&1
sed -n '/^\$ .\/build\/hbmscope reconcile/,/^```/p' "$root/README.md" | sed '1d;$d' >"$work/readme-then"
check "README example is current" cmp -s "$work/readme-now" "$work/readme-then"

echo "reconcile cli: $pass passed, $fails failed"
test "$fails" -eq 0
