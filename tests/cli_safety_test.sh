#!/usr/bin/env bash
# Issue 15 (inputs out of proportion to their cost, output safety) and issue
# 14's compare (--match/--ignore, the header, --metrics, --fail-on), as a user
# meets them. No timing: what is checked is that each case ends with the
# right answer (the bench measures speed: bench/report_io.sh).
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

# expect_error NAME 'stderr substring' ARGS...: non-zero exit, one stderr line, empty stdout
expect_error() {
  local name=$1 want=$2; shift 2
  "$bin" "$@" >"$work/out" 2>"$work/err"
  local rc=$?
  check "$name: non-zero exit" test "$rc" -ne 0
  check "$name: not an internal error" test "$rc" -ne 3
  check "$name: stdout empty" test ! -s "$work/out"
  check "$name: one stderr line" test "$(wc -l <"$work/err")" -eq 1
  if ! grep -qF -- "$want" "$work/err"; then
    echo "FAIL: $name: stderr lacks '$want': $(cat "$work/err")"; fails=$((fails + 1))
  else pass=$((pass + 1)); fi
}

# ---- merge: a shard count read from input costs nothing in proportion ----
"$bin" sweep --seq 1K --head-dim 64 --format json --output "$work/s.json" 2>/dev/null
python3 - "$work" <<'EOF'
import json, sys
w = sys.argv[1]
r = json.load(open(w + "/s.json"))
for name, index in (("huge3", 3), ("huge5", 5)):
    x = json.loads(json.dumps(r))
    x["shard"] = {"index": index, "count": 10**18, "total_rows": 10**18}
    x["rows"][0]["shape"]["seq_q"] = x["rows"][0]["shape"]["seq_kv"] = 1024 * index
    json.dump(x, open(w + "/" + name + ".json", "w"))
EOF
timeout 60 "$bin" merge "$work/huge3.json" "$work/huge5.json" >/dev/null 2>"$work/err"
check "merge of 10^18 shards: finishes" test $? -eq 0
check "merge of 10^18 shards: counts them" grep -q "merged 2 of 1000000000000000000 shards" "$work/err"
check "merge of 10^18 shards: gaps as ranges" grep -q "missing: 1-2, 4, 6-1000000000000000000$" "$work/err"

# ---- reading is linear: 1.8 MB of empty objects (98 s with the callback parser) ----
python3 -c "open('$work/objs.json', 'w').write('[' + ','.join(['{}'] * 600000) + ']')"
expect_error "device file of 600000 empty objects" "expected" model --device "$work/objs.json"

# ---- --output naming an input of the same run is refused, the input kept ----
cp "$work/s.json" "$work/a.json"
cp "$work/a.json" "$work/a.keep"
expect_error "merge --output = its input" "--output: '$work/a.json' is also an input of this run" merge "$work/a.json" --output "$work/a.json"
check "merge --output = input: input unchanged" cmp -s "$work/a.json" "$work/a.keep"
ln "$work/a.json" "$work/alink.json"
expect_error "merge --output = a hard link to its input" "is also an input of this run" merge "$work/a.json" --output "$work/alink.json"
ln -s a.json "$work/asym.json"
expect_error "compare --output = a symlink to an input" "is also an input of this run" compare "$work/s.json" "$work/a.json" --output "$work/asym.json"
check "compare --output = input: input unchanged" cmp -s "$work/a.json" "$work/a.keep"
"$bin" devices h100 --format json >"$work/dev.json"
cp "$work/dev.json" "$work/dev.keep"
expect_error "model --device F --output F" "is also an input of this run" model --device "$work/dev.json" --output "$work/dev.json"
expect_error "model --device F --plot F" "is also an input of this run" model --device "$work/dev.json" --plot "$work/dev.json"
check "device file unchanged" cmp -s "$work/dev.json" "$work/dev.keep"
echo '{"axes": {"seq": "1K", "head_dim": 64}}' >"$work/cfg.json"
expect_error "sweep --config F --output F" "is also an input of this run" sweep --config "$work/cfg.json" --output "$work/cfg.json"

# ---- compare: --ignore, the header, default columns, --fail-on ----
"$bin" sweep --seq 1K:4K:x2 --head-dim 64 --format json --output "$work/bf16.json" 2>/dev/null
"$bin" sweep --seq 1K:4K:x2 --head-dim 64 --dtype fp8 --format json --output "$work/fp8.json" 2>/dev/null
"$bin" compare "$work/bf16.json" "$work/fp8.json" >"$work/cmp0"
check "compare: nothing matched, exit 0" test $? -eq 0
check "compare: nothing matched names the axis" grep -q "no row matched: the reports differ in dtype; try --ignore dtype" "$work/cmp0"
check "compare: metric named even so" grep -q "Verdict on bytes.flash_no_l2 (lower is better)" "$work/cmp0"
"$bin" compare "$work/bf16.json" "$work/fp8.json" --ignore dtype >"$work/cmp1"
check "compare --ignore dtype: exit 0" test $? -eq 0
check "compare --ignore dtype: matched" grep -q "3 rows matched: 3 FASTER, 0 SLOWER, 0 SAME" "$work/cmp1"
check "compare --ignore dtype: header names the axis" grep -q "A and B differ in dtype: bf16 vs fp8" "$work/cmp1"
check "compare --ignore dtype: header names the match" grep -q "Rows matched on every field but dtype" "$work/cmp1"
check "compare: A and B of the metric" grep -qE "Sequence × head dim +B's shape +A +B +B/A +Verdict" "$work/cmp1"
"$bin" compare "$work/bf16.json" "$work/fp8.json" --match seq,head_dim --format json >"$work/cmp1.json"
check "compare --match: json keeps every number" python3 -c "
import json; d=json.load(open('$work/cmp1.json'))
assert d['summary']['matched']==3 and d['match']==['head_dim','seq_kv','seq_q'] or d['match']==['seq_q','seq_kv','head_dim'], d['match']
assert 'bytes.floor' in d['rows'][0]['ratios'] and d['differences']==['dtype: bf16 vs fp8'], d['differences']"
"$bin" compare "$work/bf16.json" "$work/bf16.json" >"$work/cmp2"
check "compare: numbers within the threshold not shown" bash -c "! grep -q '] bytes.standard' '$work/cmp2'"
check "compare: says how many are hidden" grep -q "more numbers within the threshold in every row (--metrics all" "$work/cmp2"
"$bin" compare "$work/bf16.json" "$work/bf16.json" --metrics bytes.standard >"$work/cmp3"
check "compare --metrics adds a column" grep -q "\[1\] bytes.standard" "$work/cmp3"
"$bin" compare "$work/fp8.json" "$work/bf16.json" --ignore dtype --fail-on slower --output "$work/gate.txt" 2>"$work/err"
check "--fail-on slower: exit 4 on a regression" test $? -eq 4
check "--fail-on slower: output written all the same" grep -q "3 SLOWER" "$work/gate.txt"
check "--fail-on slower: says why" grep -q "3 SLOWER, 0 FASTER (--fail-on slower): exit 4" "$work/err"
"$bin" compare "$work/bf16.json" "$work/fp8.json" --ignore dtype --fail-on slower >/dev/null 2>&1
check "--fail-on slower: exit 0 when faster" test $? -eq 0
"$bin" compare "$work/bf16.json" "$work/fp8.json" --ignore dtype --fail-on faster >/dev/null 2>&1
check "--fail-on faster: exit 4" test $? -eq 4
"$bin" compare "$work/bf16.json" "$work/bf16.json" --fail-on any >/dev/null 2>&1
check "--fail-on any: exit 0 when all SAME" test $? -eq 0
expect_error "--fail-on bad" "--fail-on: 'sometimes' is not one of slower, faster, any" compare "$work/bf16.json" "$work/fp8.json" --fail-on sometimes
expect_error "--match and --ignore" "--match excludes --ignore" compare "$work/bf16.json" "$work/fp8.json" --match seq --ignore dtype
expect_error "--match unknown" "--match: 'speed' is not a field" compare "$work/bf16.json" "$work/fp8.json" --match speed
"$bin" compare --help >"$work/chelp"
check "compare --help: --fail-on and exit 4" grep -q "Exit status: 0, or 4 with --fail-on" "$work/chelp"
check "compare --help: --ignore example" grep -q "compare bf16.json fp8.json --ignore dtype" "$work/chelp"

# ---- one CSV writer: quotes doubled in compare's CSV as in the sweep's ----
printf '%s\n' '{"groups": [{"label": "say \"hi\", ok", "seq": "1K", "head_dim": 64}]}' >"$work/q.json"
"$bin" sweep --config "$work/q.json" --format json --output "$work/q_r.json" 2>/dev/null
"$bin" compare "$work/q_r.json" "$work/q_r.json" --format csv >"$work/q.csv"
check "compare csv: quote doubled" grep -qF '"say ""hi"", ok"' "$work/q.csv"
check "compare csv: every line has the header's fields" python3 -c "
import csv; rows=list(csv.reader(open('$work/q.csv')))
assert len(rows)==2 and len(rows[0])==len(rows[1]) and rows[1][0]=='say \"hi\", ok', rows"
"$bin" model --seq 1000 --head-dim 100 --device h100 --format csv >"$work/m.csv"
check "csv numbers: shortest round-trip, as JSON's" python3 -c "
import csv, json, subprocess
j=json.loads(subprocess.run(['$bin','model','--seq','1000','--head-dim','100','--device','h100','--format','json'],capture_output=True,text=True).stdout)['rows'][0]
r=list(csv.DictReader(open('$work/m.csv')))[0]
# Python's repr is the shortest text that reads back the same double.
for k, v in (('intensity_standard', j['intensity']['standard']), ('seconds_floor', j['prediction']['floor']['seconds']),
             ('ridge_point', j['ridge_point'])):
    assert r[k] == repr(v), (k, r[k], repr(v))"

# ---- keys read from reports: control characters refused as in values ----
python3 - "$work" <<'EOF'
import json, sys
w = sys.argv[1]
r = json.load(open(w + "/s.json"))
for name, key in (("esc", "flash\u001b[31m"), ("nl", "a\nb")):
    x = json.loads(json.dumps(r))
    x["rows"][0]["bytes"][key] = 1
    json.dump(x, open(w + "/key_" + name + ".json", "w"))
EOF
expect_error "compare: ESC in a key" 'rows[0].bytes.flash\x1b[31m: a control character is not allowed in a key' compare "$work/key_esc.json" "$work/s.json"
expect_error "merge: newline in a key" 'rows[0].bytes.a\nb: a control character is not allowed in a key' merge "$work/key_nl.json"

# ---- long non-ASCII strings in messages: never an internal error ----
python3 - "$work" <<'EOF'
import json, sys
w = sys.argv[1]
d = json.load(open(w + "/dev.json"))
for i, ch in enumerate(("é", "€", "𝄞")):
    x = dict(d)
    x["memory_bandwidth_bytes_per_s"] = "x" * i + ch * 100
    json.dump(x, open(w + "/utf%d.json" % i, "w"), ensure_ascii=False)
    r = json.load(open(w + "/s.json"))
    r["rows"][0]["flops"] = ch * 100
    json.dump(r, open(w + "/utfr%d.json" % i, "w"), ensure_ascii=False)
EOF
for i in 0 1 2; do
  expect_error "device file, long non-ASCII value $i" "expected" model --device "$work/utf$i.json"
  check "device file $i: message is UTF-8" python3 -c "open('$work/err', encoding='utf-8').read()"
  expect_error "report, long non-ASCII value $i" "rows[0].flops: expected" compare "$work/utfr$i.json" "$work/s.json"
done

# ---- user text escaped on the way out ----
expect_error "argv in a parser error" '\x1b[31m' model --bogus$'\e[31m'
check "argv in a parser error: no raw ESC" bash -c "! grep -q $'\e' '$work/err'"
expect_error "argv in an unknown command" "unknown command 'x\\ny'" $'x\ny'
"$bin" model --output "$work/new"$'\n'"line.txt" 2>"$work/err" >/dev/null
check "wrote line: exit 0" test $? -eq 0
check "wrote line: one line, escaped" bash -c "test \$(wc -l <'$work/err') -eq 1 && grep -qF 'new\\nline.txt' '$work/err'"

cp "$work/s.json" "$work/esc"$'\e'"[31m.json"
"$bin" compare "$work/s.json" "$work/esc"$'\e'"[31m.json" >"$work/out" 2>&1
check "compare: a file name's ESC escaped in the header" bash -c "grep -qF 'esc\x1b[31m.json' '$work/out' && ! grep -q $'\e' '$work/out'"

# ---- output files: the replaced file's mode kept, else the umask honoured ----
(umask 077; "$bin" model --output "$work/private.txt" 2>/dev/null)
check "new file honours the umask" test "$(stat -c %a "$work/private.txt")" = 600
(umask 022; "$bin" model --output "$work/private.txt" 2>/dev/null)
check "replaced file keeps its mode" test "$(stat -c %a "$work/private.txt")" = 600
chmod 640 "$work/private.txt"
"$bin" merge "$work/s.json" --output "$work/private.txt" 2>/dev/null
check "merge keeps the mode too" test "$(stat -c %a "$work/private.txt")" = 640

# ---- sweep configs sized from counts; options checked before computing ----
python3 -c "
import json
json.dump({'axes': {'seq': ['1:1000000:+1'] * 40, 'head_dim': 64}}, open('$work/ranges.json', 'w'))
json.dump({'groups': [{'label': 'x', 'seq': '1:1000000:+1', 'head_dim': 64}] * 5}, open('$work/groups.json', 'w'))"
expect_error "40 range strings" "axes.seq: has too many values" sweep --config "$work/ranges.json"
expect_error "5 groups of one label" "5 group(s) make 5000000 shapes" sweep --config "$work/groups.json"
expect_error "--variants checked before a 1M-shape model" "--variants: 'nope' is not a variant of these rows" sweep --seq 1:1000000:+1 --head-dim 64 --variants nope
expect_error "--sms checked before a 1M-shape model" "--sms" model --seq 1:1000000:+1 --head-dim 64 --sms 8
expect_error "--measure's shapes checked before a 1M-shape model" "--pass: measure runs forward kernels only" sweep --seq 1:1000000:+1 --head-dim 64 --pass bwd --measure

# ---- --plot: temporary files gone on a signal, SIGHUP ignored under nohup,
# report and chart all-or-nothing ----
mkdir -p "$work/fakebin"
cat >"$work/fakebin/gnuplot" <<'EOF'
#!/bin/bash
# A stand-in for gnuplot: logs its files, waits, draws.
out=$(readlink /proc/$$/fd/1) err=$(readlink /proc/$$/fd/2) script=${1:-$(readlink /proc/$$/fd/0)}
printf 'script %s\nout %s\nerr %s\npid %s\n' "$script" "$out" "$err" "$$" >>"$FAKE_LOG"
sleep "${FAKE_SLEEP:-0}"
if [ -n "${FAKE_BIG:-}" ]; then ulimit -S -f unlimited; head -c 400000 /dev/zero | tr '\0' x; else echo '<svg></svg>'; fi
EOF
chmod +x "$work/fakebin/gnuplot"
wait_for_log() {  # until the fake gnuplot has started (at most 10 s)
  for _ in $(seq 100); do grep -q '^pid' "$FAKE_LOG" 2>/dev/null && return 0; sleep 0.1; done
  return 1
}
export FAKE_LOG="$work/fake.log"
for sig in TERM INT; do
  rm -f "$FAKE_LOG"
  # A background job of a script starts with SIGINT ignored: python sets it back.
  PATH="$work/fakebin:$PATH" FAKE_SLEEP=30 python3 -c 'import os, signal, sys
signal.signal(signal.SIGINT, signal.SIG_DFL)
os.execv(sys.argv[1], sys.argv[1:])' "$bin" model --plot "$work/sig.svg" --output "$work/sig.txt" 2>/dev/null &
  pid=$!
  wait_for_log
  check "SIG$sig during gnuplot: it started" test -s "$FAKE_LOG"
  kill -"$sig" "$pid"
  wait "$pid" 2>/dev/null
  kill "$(sed -n 's/^pid //p' "$FAKE_LOG")" 2>/dev/null
  for f in $(sed -n 's/^\(script\|out\|err\) //p' "$FAKE_LOG" | sed 's/ (deleted)$//'); do
    check "SIG$sig during gnuplot: $f removed" test ! -e "$f"
  done
  check "SIG$sig during gnuplot: no temporary file beside the targets" bash -c "! ls -A '$work' | grep -q '^\.sig\.'"
  check "SIG$sig during gnuplot: no report" test ! -e "$work/sig.txt"
done
rm -f "$FAKE_LOG"
(trap '' HUP; PATH="$work/fakebin:$PATH" FAKE_SLEEP=1 exec "$bin" model --plot "$work/hup.svg" --output "$work/hup.txt" 2>/dev/null) &
pid=$!
wait_for_log
kill -HUP "$pid"
wait "$pid"
check "SIGHUP under nohup: the run goes on" test $? -eq 0
check "SIGHUP under nohup: report written" test -s "$work/hup.txt"
check "SIGHUP under nohup: chart written" test -s "$work/hup.svg"
echo old >"$work/pair.txt"
(ulimit -S -f 100; PATH="$work/fakebin:$PATH" FAKE_BIG=1 "$bin" model --plot "$work/pair.svg" --output "$work/pair.txt" >/dev/null 2>"$work/err")
check "chart that cannot be written: exit 1" test $? -eq 1
check "chart that cannot be written: report not replaced" grep -qx old "$work/pair.txt"
check "chart that cannot be written: no chart" test ! -e "$work/pair.svg"
check "chart that cannot be written: no temporary file" bash -c "! ls -A '$work' | grep -q '^\.pair\.'"

echo "$pass passed, $fails failed"
[ "$fails" -eq 0 ]
