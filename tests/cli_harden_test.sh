#!/usr/bin/env bash
# Issue 22, as a user meets it: one exit code per kind of mistake (README,
# "Exit status"), options that would do nothing refused, input bytes that
# cannot cut a message short, cost bounded by the input (checked by memory and
# by a generous wall-clock ceiling that only a runaway would reach: speed
# itself lives in bench/), outputs that a kill leaves no trace of, plots with
# many series, and a compare table a person can read.
source "$(dirname "$0")/lib.sh"

# exit_is CODE ARGS...: that exit code; on an error one stderr line and empty stdout
exit_is() {
  local want=$1; shift
  "$bin" "$@" >"$work/out" 2>"$work/err" </dev/null
  local rc=$?
  if [ "$rc" != "$want" ]; then
    echo "FAIL: exit $rc, not $want: hbmscope $*: $(head -c 300 "$work/err")"; fails=$((fails + 1)); return
  fi
  if [ "$want" != 0 ]; then
    if [ -s "$work/out" ] || [ "$(wc -l <"$work/err")" -ne 1 ]; then
      echo "FAIL: hbmscope $*: not one stderr line with an empty stdout"; fails=$((fails + 1)); return
    fi
  fi
  pass=$((pass + 1))
}

"$bin" model --seq 4096 --device h100 --format json --output "$work/a.json" 2>/dev/null
cp "$work/a.json" "$work/b.json"

# ---- exit 2: the command line is malformed ----
exit_is 2 model --decode --seq-kv 4096 --splits 0
exit_is 2 model --decode --seq-kv 4096 --splits 4097          # outside the option's range, as 0 is
exit_is 2 model --decode --seq-kv 4096 --splits 1:5000:+1
exit_is 2 model --decode --seq-kv 4096 --page-size 0
exit_is 2 model --splits 4                                    # needs --decode
exit_is 2 model --page-size 16
exit_is 2 model --context-lengths 5,6 --batch 2               # options that exclude each other
exit_is 2 model --context-lengths 5,6 --block-rows 64         # would do nothing: decode has key blocks only
exit_is 2 model --decode --seq-kv 4096 --pass bwd
exit_is 2 model --decode --seq-kv 4096 --fa1
exit_is 2 model --pass bwd --fa1
exit_is 2 model --decode --seq-kv 4096 --device h100 --l2-order head-major
exit_is 2 model --format json --wide                          # table options with json/csv do nothing
exit_is 2 model --format csv --units binary
exit_is 2 model --format json --columns bytes
exit_is 2 model --output "$work/x.csv" --wide
exit_is 2 model --device h1000                                # names no preset
exit_is 2 model --format xml
exit_is 2 model --sms 132
exit_is 2 model --x seq
exit_is 2 model --bandwidth-fraction 0.5
exit_is 2 sweep --config nosuch
exit_is 2 sweep --shard 0/4
exit_is 2 sweep --progress sometimes
exit_is 2 sweep --kernels flash
exit_is 2 walk --variant decode_split                         # without --decode
exit_is 2 walk --sms 108
exit_is 2 walk --pass bwd
exit_is 2 walk --no-animate --delay 5
exit_is 2 walk --decode --seq-kv 4096 --order fa2 --no-animate
exit_is 2 walk --decode --seq-kv 4096 --page-size 32 --no-animate   # decode_split reads no pages
exit_is 2 walk --decode --seq-kv 4096 --variant decode_floor --no-animate
exit_is 2 walk --decode --seq-kv 4096 --sms 99999999 --no-animate
exit_is 2 walk --seq 1024,2048 --no-animate
exit_is 2 softmax 1 2 3 --seed 5                              # --seed is --random's
exit_is 2 softmax 1 2 3 --no-animate --delay 5
exit_is 2 softmax --block 0 1 2
exit_is 2 softmax --random 500
exit_is 2 measure --pass bwd
exit_is 2 measure --format json --wide
exit_is 2 measure --repeats 0
exit_is 2 compare "$work/a.json" "$work/b.json" --match seq --ignore dtype
exit_is 2 compare "$work/a.json" "$work/b.json" --match nosuch
exit_is 2 compare "$work/a.json" "$work/b.json" --metric nosuch
exit_is 2 compare "$work/a.json" "$work/b.json" --metrics nosuch
exit_is 2 compare "$work/a.json" "$work/b.json" --threshold 200
exit_is 2 compare "$work/a.json" "$work/b.json" --fail-on sometimes
exit_is 2 compare "$work/a.json" "$work/b.json" --format json --metrics all
exit_is 2 model --decode --seq 9 --seq-kv 4096                # decode takes 1 to 8 new tokens (--help)
exit_is 2 softmax -- 1 nan 2
exit_is 2 model --device h100 --bandwidth-fraction 2
exit_is 2 model --columns time
exit_is 2 measure --flush-bytes 17
exit_is 2 devices --format xml
exit_is 2 devices h1000
exit_is 2 merge "$work/a.json" --format xml
# ---- exit 1: well formed, but refused by the model, or an unusable input ----
exit_is 1 model --seq 4096 --heads 3 --kv-heads 2
exit_is 1 model --seq 4G --head-dim 4G --batch 4G
exit_is 1 model --seq 1:5000000:+1
exit_is 1 model --seq 4096 --dtype fp8 --device a100
exit_is 1 model --device "$work/none.json"
exit_is 1 sweep --config "$work/none.json"
exit_is 1 model --context-lengths "@$work/none.txt"
exit_is 1 compare "$work/a.json" "$work/none.json"
# ---- and what is well formed runs ----
exit_is 0 model --format table --units binary
exit_is 0 walk --decode --seq-kv 4096 --page-size 32 --variant decode_paged --no-animate
exit_is 0 softmax --random 5 --seed 5 --no-animate
exit_is 0 model --context-lengths 5,6 --block-cols 64

# ---- a NUL byte in a --context-lengths @FILE: named escaped, the message whole ----
printf '512\n12\0003,4\n' >"$work/nul.txt"
exit_is 1 model --context-lengths "@$work/nul.txt"
check "NUL in @FILE: escaped, file and line named" grep -qF "'12\\x003' is not a length ($work/nul.txt, line 2)" "$work/err"
printf '512\n12\0003,4\n' >"$work/nul_seq.txt"
exit_is 1 model --seq-lens "@$work/nul_seq.txt" --head-dim 64
check "NUL in --seq-lens @FILE: the same parser, escaped" grep -qF "'12\\x003' is not a length ($work/nul_seq.txt, line 2)" "$work/err"
printf '1\n\033]0;x\a7\n' >"$work/esc.txt"
exit_is 1 model --context-lengths "@$work/esc.txt"
check "escape in @FILE: no control byte on stderr" test "$(tr -d '\n' <"$work/err" | tr -d '[:print:]' | wc -c)" -eq 0

# ---- a subnormal number in a report: refused by compare, never an "inf" ratio ----
python3 - "$work" <<'PY'
import json, sys
w = sys.argv[1]
r = json.load(open(w + "/a.json"))
r["rows"][0]["prediction"]["flash_no_l2"]["seconds"] = 5e-324
json.dump(r, open(w + "/sub.json", "w"))
PY
exit_is 1 compare "$work/sub.json" "$work/a.json"
check "compare of a subnormal: named" grep -qF "sub.json: rows[0].prediction.flash_no_l2.seconds: 5e-324 is subnormal" "$work/err"
for f in table csv json md; do
  if [ $f = json ]; then more=(); else more=(--metrics all); fi
  "$bin" compare "$work/a.json" "$work/b.json" --format $f "${more[@]}" >"$work/cmp.$f" 2>/dev/null
  check "compare --format $f: output" test -s "$work/cmp.$f"
  check "compare --format $f: no inf" bash -c "! grep -qi 'inf\b' '$work/cmp.$f'"
done

# ---- --plot: many series are capped (and named), gnuplot has a time limit ----
if command -v gnuplot >/dev/null; then
  "$bin" model --seq 1K:8K:x2 --heads 1:50:+1 --device h100 --plot "$work/p50.svg" --format csv \
    >/dev/null 2>"$work/err"
  check "plot of 50 series: written" test -s "$work/p50.svg"
  check "plot of 50 series: 32 drawn, the rest named" \
    grep -qF "drew 32 of 50 series (at most 32; left out: H=33/33; H=34/34; H=35/35; H=36/36; H=37/37; and 13 more)" "$work/err"
  check "plot of 50 series: 32 data blocks" test "$(grep -c 'H=[0-9]*/[0-9]*' "$work/p50.svg")" -gt 0
fi
mkdir -p "$work/fake"
printf '#!/bin/sh\necho $$ >"%s"\nexec sleep 600\n' "$work/fake/pid" >"$work/fake/gnuplot"
chmod +x "$work/fake/gnuplot"
start=$(date +%s)
HBMSCOPE_GNUPLOT_TIMEOUT=1 PATH="$work/fake:$PATH" "$bin" model --seq 1K,2K --plot "$work/slow.svg" \
  --output "$work/slow.json" >"$work/out" 2>"$work/err"
rc=$?
check "gnuplot past its time limit: exit 1" test $rc -eq 1
check "gnuplot past its time limit: says so" grep -qF "hbmscope: error: --plot: gnuplot did not finish within 1 s (HBMSCOPE_GNUPLOT_TIMEOUT)" "$work/err"
check "gnuplot past its time limit: stopped at once" test $(($(date +%s) - start)) -lt 60
check "gnuplot past its time limit: no file written" test ! -e "$work/slow.svg" -a ! -e "$work/slow.json"
check "gnuplot past its time limit: killed" bash -c "! kill -0 $(cat "$work/fake/pid" 2>/dev/null || echo 999999) 2>/dev/null"
HBMSCOPE_GNUPLOT_TIMEOUT=soon "$bin" model --seq 1K,2K --plot "$work/t.svg" >"$work/out" 2>"$work/err"
check "a bad HBMSCOPE_GNUPLOT_TIMEOUT: exit 1, said" bash -c "test $? -eq 1 && grep -q 'HBMSCOPE_GNUPLOT_TIMEOUT' '$work/err'"

# ---- compare of two --device reports reads like model's table ----
for dev in h100 h200; do
  "$bin" sweep --config llm --seq 4K:32K:x2 --device $dev --format json --output "$work/llm-$dev.json" 2>/dev/null
  "$bin" sweep --config decode --seq-kv 4K,32K --batch 1,16 --device $dev --format json --output "$work/dec-$dev.json" 2>/dev/null
done
for kind in llm dec; do
  "$bin" compare "$work/$kind-h200.json" "$work/$kind-h100.json" >"$work/cmp-$kind" 2>"$work/err"
  check "compare $kind h200/h100: exit 0" test $? -eq 0
  check "compare $kind h200/h100: at most 120 columns" test "$(maxw "$work/cmp-$kind")" -le 120
  check "compare $kind h200/h100: times with units" grep -qE " [0-9.]+ (ns|µs|ms) +[0-9.]+ (ns|µs|ms) +1\.43 +SLOWER$" "$work/cmp-$kind"
  check "compare $kind h200/h100: no raw seconds" bash -c "! grep -qE '[0-9]e-0[0-9]' '$work/cmp-$kind'"
  check "compare $kind h200/h100: verdict column last" grep -qE "^Group +Sequence × head dim .* +A +B +B/A +Verdict$" "$work/cmp-$kind"
  check "compare $kind h200/h100: other ratios under short names" grep -qE "^  \[1\] [a-z0-9_]+\." "$work/cmp-$kind"
  check "compare $kind h200/h100: no metric path in a header" bash -c "! grep -qE '^Group.*(prediction|bytes)\.' '$work/cmp-$kind'"
  "$bin" compare "$work/$kind-h200.json" "$work/$kind-h100.json" --wide >"$work/cmpw-$kind"
  check "compare --wide $kind: full names in one table" grep -qE "^Group .*A prediction\.decode_split\.seconds|^Group .*A prediction\.flash_no_l2\.seconds" "$work/cmpw-$kind"
  check "compare --wide $kind: wider than 120" test "$(maxw "$work/cmpw-$kind")" -gt 120
  "$bin" compare "$work/$kind-h200.json" "$work/$kind-h100.json" --format csv >"$work/cmpc-$kind"
  check "compare --format csv $kind: raw numbers kept" grep -qE "[0-9]e-0[0-9]" "$work/cmpc-$kind"
done
"$bin" compare "$work/llm-h200.json" "$work/llm-h100.json" --format md >"$work/cmp-md"
check "compare --format md: a Markdown table with units" grep -qE "^\| Llama-3 8B \| 4096 × 128 \| 32/8 \| [0-9.]+ µs \| [0-9.]+ µs \| 1.43 \| SLOWER \|$" "$work/cmp-md"
check "compare --format md: the legend as a list" grep -qE "^- \[1\] " "$work/cmp-md"
exit_is 2 compare "$work/llm-h200.json" "$work/llm-h100.json" --wide --format json
# Attention as served and whole models: the fields that tell rows apart are columns.
for dev in h100 h200; do
  "$bin" model --seq 4K,8K --causal --window 0,1K --kv-dtype same,fp8 --device $dev --format json \
    --output "$work/srv-$dev.json" 2>/dev/null
  "$bin" model --model-config gemma-2-9b,qwen3-8b --seq 4K,16K --device $dev --format json \
    --output "$work/wm-$dev.json" 2>/dev/null
done
"$bin" compare "$work/srv-h200.json" "$work/srv-h100.json" >"$work/cmp-srv" 2>"$work/err"
check "compare of windows and kv dtypes: at most 120 columns" test "$(maxw "$work/cmp-srv")" -le 120
check "compare of windows and kv dtypes: Mask and KV dtype columns" grep -qE "^Sequence × head dim +Mask +KV dtype +A +B +B/A +Verdict$" "$work/cmp-srv"
check "compare of windows and kv dtypes: a row of each" grep -qE "^4096 × 64 +window 1024 +fp8 " "$work/cmp-srv"
"$bin" compare "$work/wm-h200.json" "$work/wm-h100.json" >"$work/cmp-wm" 2>"$work/err"
check "compare of whole models: at most 120 columns" test "$(maxw "$work/cmp-wm")" -le 120
check "compare of whole models: model and kind of layer named" grep -qE "^gemma-2-9b sliding " "$work/cmp-wm"

# ---- cost bounded by the input: refused in one line, or run in bounded memory ----
# The memory a small run needs (a CUDA build maps cuBLAS at load time); the
# checks below allow a fixed amount above it, whatever the number of rows.
vbase=
for v in 200000 400000 800000 1600000; do
  if (ulimit -v $v; "$bin" model >/dev/null 2>"$work/vprobe.err"); then vbase=$v; break; fi
done
if [ -z "$vbase" ] && grep -q "Sanitizer" "$work/vprobe.err"; then
  echo "SKIP: memory bounds: AddressSanitizer cannot run under ulimit -v"
else
  vbase=${vbase:-3200000}
  bounded() {  # bounded KB ARGS...: runs hbmscope with KB above vbase, stdout to $work/out
    local kb=$1; shift
    (ulimit -v $((vbase + kb)); timeout 300 "$bin" "$@" >"$work/out" 2>"$work/err" </dev/null)
  }
  # 100 shapes sharing 1M context lengths: the product is bounded before anything is made.
  for f in csv json; do
    bounded 200000 model --context-lengths 1:1000000:+1 --splits 1:100:+1 --format $f
    check "1M lengths x 100 splits, $f: exit 1" test $? -eq 1
    check "1M lengths x 100 splits, $f: refused in one line" grep -qx "hbmscope: error: sweep too large: its shapes hold 100000000 ragged sequences in all (at most 16777216); sweep fewer values or shorter batches" "$work/err"
  done
  bounded 200000 sweep --context-lengths 1:1000000:+1 --heads 1:2048:+1
  check "1M lengths x 2048 shapes: refused" grep -q "2048000000 ragged sequences in all" "$work/err"
  bounded 200000 measure --context-lengths 1:1000000:+1 --splits 1:100:+1
  check "measure of 1M lengths x 100: refused before looking for a device" grep -q "100000000 ragged sequences in all" "$work/err"
  # 16 shapes of 1M lengths are within the bound: written, every length of every row.
  bounded 300000 model --context-lengths 1:1000000:+1 --splits 1:16:+1 --format csv
  check "1M lengths x 16 splits: written in bounded memory" test $? -eq 0
  check "1M lengths x 16 splits: 16 rows" test "$(wc -l <"$work/out")" -eq 17
  # Rows stream to JSON, CSV and Markdown: memory does not grow with their number
  # (held, 200000 JSON rows took about 600 MB).
  for f in json csv md; do
    bounded 150000 model --seq 1:200000:+1 --head-dim 64 --device h100 --l2-bytes 0 --format $f
    check "200000 rows as $f: in bounded memory" test $? -eq 0
  done
  check "200000 rows as md: every row written" test "$(grep -c '^| [0-9]* × 64 |' "$work/out")" -eq 200000
  bounded 150000 model --seq 1:200000:+1 --head-dim 64 --device h100 --l2-bytes 0 --format json
  check "200000 rows as json: every row written" test "$(grep -c '"shape": {' "$work/out")" -eq 200000
  check "200000 rows as json: whole" test "$(tail -c 2 "$work/out")" = "}"
  bounded 150000 sweep --heads 1:2048:+1 --seq 4096 --device h100 --format csv
  check "2048 shapes as csv: in bounded memory" test $? -eq 0
  # The table needs every row for its widths: it says so, and is bounded.
  bounded 150000 model --seq 1:999999:+1 --head-dim 64 --device h100
  check "a table of 999999 rows: exit 1" test $? -eq 1
  check "a table of 999999 rows: says why and what instead" grep -qx "hbmscope: error: the table needs every row before it is drawn: 999999 rows, more than 100000; use --format csv, json or md (printed as the rows come), or --shard I/N" "$work/err"
fi

# ---- rows printed as they come are the rows a held report prints ----
# (--plot holds the rows: the printers then take their layout from all of them)
if command -v gnuplot >/dev/null; then
  while IFS='|' read -r args chart; do  # ARGS [| the chart's own options]
    for f in csv md; do
      # shellcheck disable=SC2086
      "$bin" $args --format $f >"$work/streamed.$f" 2>/dev/null
      # shellcheck disable=SC2086
      "$bin" $args --output "$work/held.$f" --plot "$work/held.svg" $chart >/dev/null 2>&1
      check "streamed = held, $f: $args" cmp -s "$work/streamed.$f" "$work/held.$f"
    done
  done <<'EOF2'
model --seq 1K:8K:x2 --head-dim 64,128 --pass fwd,bwd,fwdbwd --fa1
model --seq 4K,16K --head-dim 128 --heads 32 --kv-heads 8 --causal --device h200 --bandwidth-fraction 0.8
model --decode --seq-kv 4K,128K --batch 1,8 --heads 32 --kv-heads 8 --device h200
model --context-lengths 512,4096,128K --heads 16,64 --kv-heads 8 --device h100 --page-size 16,64 | --x heads
model --seq 1K,4K --dtype bf16,fp8 --block-rows 64,128 --device h100 --variants flash_no_l2,floor
model --seq 1K:64K:x4 --head-dim 128 --l2-bytes 40M --sms 108
sweep --config llm --seq 4K,8K --device h100
sweep --config decode --seq-kv 4K,32K --device h200
sweep --config llm --seq 4K:32K:x2 --shard 2/3 --device h100
model --seq 1K,4K --device a100 --dtype fp16,fp32
model --model-config mistral-7b-v0.1,gemma-2-9b --seq 4K,16K --device h100
sweep --model-config llama-3.1-8b,gemma-2-9b --seq 1K,4K --causal --l2-bytes 40M --sms 132 --device h100 --shard 1/2
model --seq 4K,8K --causal --window 0,1K --kv-dtype same,fp8 --head-dim-v 64,128 --device h100
model --seq-lens 512,1K:4K,300 --head-dim 128 --causal --device h100 --l2-bytes 50M
model --mla 512,64 --heads 16 --decode --seq-kv 4K,32K --device h200
EOF2
fi

# ---- SIGKILL while the report is written leaves nothing behind ----
mkdir -p "$work/kill"
killed_while_writing() {  # killed_while_writing NAME ARGS...: SIGKILL once the output is open
  local name=$1; shift
  "$bin" "$@" 2>/dev/null &
  local pid=$! seen=
  for _ in $(seq 1000); do  # until its temporary file is open (at most 10 s)
    if ls -l /proc/$pid/fd 2>/dev/null | grep -qF "$work/kill/"; then seen=1; break; fi
    sleep 0.01
  done
  kill -KILL $pid 2>/dev/null
  wait $pid 2>/dev/null
  check "SIGKILL during $name: the file was being written" test -n "$seen"
  check "SIGKILL during $name: nothing left" test -z "$(ls -A "$work/kill")"
}
killed_while_writing "sweep --output" sweep --seq 1:400000:+1 --head-dim 64 --format json --output "$work/kill/r.json"
"$bin" sweep --seq 1:300000:+1 --head-dim 64 --format json --output "$work/big.json" 2>/dev/null
killed_while_writing "merge --output" merge "$work/big.json" --output "$work/kill/m.json"

echo "cli harden: $pass passed, $fails failed"
[ "$fails" -eq 0 ]
