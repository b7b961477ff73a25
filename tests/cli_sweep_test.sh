#!/usr/bin/env bash
# Devices, the roofline, sweeps, shards, merge, compare and plots as a user meets
# them (the rest of the command line: cli_test.sh, cli_limits_test.sh).
source "$(dirname "$0")/lib.sh"
"$bin" >"$work/default"  # the note's table, which a sweep of the seed config must equal

# ---- Devices, roofline, sweeps, shards, merge, compare, plots (issue 3) ----
src=$(cd "$(dirname "$0")/.." && pwd)
"$bin" devices >"$work/devs"
check "devices exits 0" test $? -eq 0
for d in "H100 SXM" "H200 SXM" "A100 80GB SXM" "B200 (HGX)" "L40S" "RTX 4090"; do
  check "devices lists $d" grep -qF "$d" "$work/devs"
done
check "devices shows units" bash -c "grep -q '3.35 TB/s .*50 MiB .*132' '$work/devs' && grep -q '^h100-sxm, h100  *989 TFLOP/s' '$work/devs'"
check "devices fits 120 columns" test "$(maxw "$work/devs")" -le 120
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
check "llm sweep with a device fits 120 columns" test "$(maxw "$work/llm")" -le 120
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

# Every shipped config with --device h100: every row simulated, nothing left out (issue 20; the
# speed is bench/l2_configs.sh's).
for cfg in "$(dirname "$0")"/../configs/sweeps/*.json; do
  name=$(basename "$cfg" .json)
  "$bin" sweep --config "$name" --device h100 --format csv >"$work/cfg.csv" 2>"$work/cfg.err"
  check "config $name --device h100: exit 0" test $? -eq 0
  check "config $name --device h100: nothing left out" bash -c "! grep -q 'left out' '$work/cfg.err'"
  check "config $name --device h100: every row simulated" python3 -c "
import csv; rows=list(csv.DictReader(open('$work/cfg.csv')))
sims=[k for k in rows[0] if k.startswith('bytes_') and k.endswith('_l2_sim')]
assert rows and sims and all(r[k] for r in rows for k in sims), sims"
done

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
"$bin" sweep --config llm --shard 2/2 --device h100 --l2-bytes 0 --format json --output "$work/h2dev.json" 2>/dev/null
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
  "$bin" sweep --config llm --seq 4K:16K:x2 --device h100 --plot "$work/time.png" >/dev/null 2>&1
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

finish
