#!/usr/bin/env bash
# Attention as served on the command line (issue 19): --window, --chunk,
# --head-dim-v, --kv-dtype, --mla, --seq-lens in model, sweep, walk, measure,
# compare and merge; exit 2 for a malformed command line, 1 for a value the
# model refuses, one stderr line and nothing on stdout either way.
set -u
bin=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fails=0
pass=0

check() {  # check NAME CONDITION...
  local name=$1; shift
  if "$@"; then pass=$((pass + 1)); else echo "FAIL: $name"; fails=$((fails + 1)); fi
}

# expect_exit NAME RC 'stderr substring' ARGS...: exit RC, one stderr line, empty stdout
expect_exit() {
  local name=$1 want_rc=$2 want=$3; shift 3
  "$bin" "$@" >"$work/out" 2>"$work/err"
  local rc=$?
  check "$name: exit $want_rc (got $rc)" test "$rc" -eq "$want_rc"
  check "$name: stdout empty" test ! -s "$work/out"
  check "$name: one stderr line" test "$(wc -l <"$work/err")" -eq 1
  if ! grep -qF -- "$want" "$work/err"; then
    echo "FAIL: $name: stderr lacks '$want': $(cat "$work/err")"; fails=$((fails + 1))
  else pass=$((pass + 1)); fi
}

# --help teaches every new option.
"$bin" model --help >"$work/help"
for opt in --window --chunk --head-dim-v --kv-dtype --mla --seq-lens; do
  check "model --help: $opt" grep -q -- "$opt" "$work/help"
done
check "help: window convention" grep -q "p - W < c <= p" "$work/help"
for cmd in sweep walk measure reconcile; do
  "$bin" "$cmd" --help >"$work/h_$cmd" 2>&1
  check "$cmd --help has --window" grep -q -- "--window" "$work/h_$cmd"
done

# A window: exact bytes (docs/model.md, "Masks"): 512 x 64, W = 128, blocks of 128: 7 tiles.
"$bin" model --seq 512 --head-dim 64 --causal --window 128 --format csv >"$work/w.csv"
check "window: flash_no_l2 360448 B" grep -q ",360448,262144," "$work/w.csv"
check "window: csv columns" grep -q ",window,chunk,head_dim_v,kv_dtype" "$work/w.csv"
"$bin" model --seq 32K --head-dim 128 --heads 32 --kv-heads 8 --causal --window 0,4096 >"$work/w.txt"
check "window sweep: a Mask column" grep -q "window 4096" "$work/w.txt"
"$bin" model --seq 1000 --head-dim 64 --causal --chunk 300 >"$work/c.txt"
check "chunk in the title" grep -q "causal, chunk 300)" "$work/c.txt"

# Operand shapes.
"$bin" model --seq 4K --head-dim 192 --head-dim-v 128 --heads 128 --causal >"$work/dv.txt"
check "DV in the title" grep -q "V and O of head dim 128" "$work/dv.txt"
"$bin" model --seq 4K --head-dim 128 --kv-dtype bf16,fp8 --format json >"$work/kv.json"
check "kv dtype: JSON" python3 -c "
import json; d = json.load(open('$work/kv.json'))
assert d['schema'] == 'hbmscope.report/3'
assert 'kv_dtype' not in d['rows'][0]['shape'] and d['rows'][1]['shape']['kv_dtype'] == 'fp8'
assert d['rows'][1]['bytes']['floor'] < d['rows'][0]['bytes']['floor']"
"$bin" model --decode --mla 512,64 --heads 128 --seq-kv 32K --format json >"$work/mla.json"
check "MLA decode: latent KV read once at the floor" python3 -c "
import json; r = json.load(open('$work/mla.json'))['rows'][0]
s = r['shape']; assert s['latent_kv'] and s['head_dim'] == 576 and s['head_dim_v'] == 512 and s['kv_heads'] == 1
assert r['decode']['variants']['decode_floor']['kv_bytes'] == 32768 * 576 * 2, r['decode']"

# Ragged prefill: a list, a file, Q:KV items.
printf '512\n# a cached prefix\n1K:8K, 4096\n' >"$work/lens.txt"
"$bin" model --seq-lens @"$work/lens.txt" --head-dim 128 --causal --format csv >"$work/r1.csv"
"$bin" model --seq-lens 512,1K:8K,4K --head-dim 128 --causal --format csv >"$work/r2.csv"
check "seq-lens: @FILE = the list" cmp -s "$work/r1.csv" "$work/r2.csv"
check "seq-lens: batch 3, longest 4096/8192" grep -q "^3,1,1,4096,8192,128," "$work/r2.csv"
check "seq-lens: items in CSV" grep -q ",5632,512;1024:8192;4096$" "$work/r2.csv"
"$bin" model --seq-lens 512,1K:8K,4K --head-dim 128 --causal >"$work/r.txt"
check "seq-lens: Sequences column" grep -q "3 seqs, q 512..4096 of kv 512..8192" "$work/r.txt"

# Sweeps: a config with the new keys, shape options over a config.
cat >"$work/served.json" <<'EOF'
{"groups": [
  {"label": "Mistral 7B", "seq": "4K,32K", "head_dim": 128, "heads": 32, "kv_heads": 8, "causal": true, "window": [0, 4096]},
  {"label": "packed", "seq_lens": [[512, "4K", "1K:8K"]], "head_dim": 128, "causal": true, "kv_dtype": "fp8"}]}
EOF
"$bin" sweep --config "$work/served.json" --format csv >"$work/s.csv"
check "sweep config: 5 rows" test "$(wc -l <"$work/s.csv")" -eq 6
"$bin" sweep --config llm --window 4096 --format json --output "$work/llm_w.json"
"$bin" sweep --config llm --format json --output "$work/llm.json"
check "sweep --window over a config" python3 -c "
import json; assert all(r['shape']['window'] == 4096 for r in json.load(open('$work/llm_w.json'))['rows'])"
"$bin" compare "$work/llm.json" "$work/llm_w.json" >"$work/cmp.txt"
check "compare: nothing matches, the hint names window" grep -q "try --ignore window" "$work/cmp.txt"
"$bin" compare "$work/llm.json" "$work/llm_w.json" --ignore window >"$work/cmp2.txt"
check "compare --ignore window: FASTER" grep -q "FASTER" "$work/cmp2.txt"
"$bin" sweep --config llm --window 4096 --format json --shard 1/2 --output "$work/p1.json"
"$bin" sweep --config llm --window 4096 --format json --shard 2/2 --output "$work/p2.json"
"$bin" merge "$work/p1.json" "$work/p2.json" --output "$work/m.json"
check "merge of windowed shards = the whole" python3 -c "
import json; a = json.load(open('$work/m.json')); b = json.load(open('$work/llm_w.json'))
assert a['rows'] == b['rows'] and a['schema'] == 'hbmscope.report/3'"
"$bin" merge "$work/llm.json" "$work/llm_w.json" --output "$work/both.json"
check "merge keeps windowed and plain rows apart" python3 -c "
import json; assert len(json.load(open('$work/both.json'))['rows']) == 2 * len(json.load(open('$work/llm.json'))['rows'])"

# walk shows the window's band.
"$bin" walk --seq 1024 --head-dim 64 --causal --window 256 --no-animate >"$work/walk.txt"
check "walk with a window ends at the closed forms" grep -q "flash_no_l2" "$work/walk.txt"

# Refusals: 2 for a malformed command line, 1 for a value the model refuses.
expect_exit "window without causal" 2 "--window: narrows the causal mask; add --causal" model --window 4096
expect_exit "chunk without causal" 2 "--chunk: narrows the causal mask" model --chunk 8192
expect_exit "window malformed" 2 "--window: 'x'" model --causal --window x
expect_exit "window and chunk" 1 "window and chunk cannot be combined" model --causal --window 4K --chunk 8K
expect_exit "kv dtype unknown" 2 "--kv-dtype: 'int4' is not a dtype" model --kv-dtype int4
expect_exit "mla one value" 2 "--mla: '512' must be two values R,P" model --mla 512
expect_exit "mla with head-dim" 2 "--mla: sets --head-dim" model --mla 512,64 --head-dim 128
expect_exit "mla with kv-heads" 2 "--mla: sets --head-dim" model --mla 512,64 --kv-heads 8
expect_exit "mla backward" 1 "pass fwd only" model --mla 512,64 --heads 16 --pass bwd
expect_exit "seq-lens Q over KV" 2 "more new tokens (Q) than keys" model --seq-lens 8K:1K
expect_exit "seq-lens malformed" 2 "--seq-lens: 'abc'" model --seq-lens abc
expect_exit "seq-lens with seq" 2 "--seq-lens: gives the batch" model --seq-lens 1K,2K --seq 4K
expect_exit "seq-lens with decode" 2 "a decode batch is --context-lengths" model --decode --seq-lens 1K
expect_exit "seq-lens file missing" 1 "--seq-lens: cannot read" model --seq-lens @"$work/none.txt"
printf '512\n1K:zz\n' >"$work/badlens.txt"
expect_exit "seq-lens file: bad line named" 1 "badlens.txt, line 2" model --seq-lens @"$work/badlens.txt"
expect_exit "walk refuses a ragged batch" 2 "walk draws one sequence" walk --seq-lens 1K,2K
expect_exit "head-dim-v 0 list only" 2 "--head-dim-v: 'q'" model --head-dim-v q
expect_exit "model-config gives the window" 2 "--window: the model config gives it" model --model-config mistral-7b-v0.1 --seq 4K --causal --window 1K
expect_exit "model-config gives DV" 2 "--head-dim-v: the model config gives it" model --model-config llama-3.1-8b --seq 4K --head-dim-v 64
# measure: one line before any device, for what no kernel of ours runs.
for args in "--head-dim 128 --head-dim-v 64" "--kv-dtype fp8" "--causal --chunk 1K" "--seq-lens 1K,2K" "--mla 512,64 --heads 16"; do
  # shellcheck disable=SC2086
  expect_exit "measure refuses: $args" 1 "measure: our kernels do not run" measure $args
done
# shellcheck disable=SC2086
expect_exit "sweep --measure refuses an fp8 cache" 1 "measure: our kernels do not run K and V in a dtype" sweep --seq 1K --head-dim 64 --kv-dtype fp8 --measure

# The README's examples are this binary's output.
root=$(cd "$(dirname "$0")/.." && pwd)
for cmd in "model --seq 32K --head-dim 128 --heads 32 --kv-heads 8 --causal --window 0,4096 --kv-dtype same,fp8 --device h200 --l2-bytes 0 --columns bytes,time" \
           "model --seq-lens 512,1K:8K,4K --head-dim 128 --heads 32 --kv-heads 8 --causal --columns bytes"; do
  awk -v c="\$ ./build/hbmscope $cmd" '$0 == c {on = 1; next} on && /^```/ {exit} on' "$root/README.md" >"$work/readme"
  # shellcheck disable=SC2086
  "$bin" $cmd >"$work/now" 2>/dev/null
  check "README example: hbmscope ${cmd:0:40}..." test -s "$work/readme"
  check "README example is the output: ${cmd:0:40}..." cmp -s "$work/readme" "$work/now"
done

echo "$pass passed, $fails failed"
test "$fails" -eq 0
