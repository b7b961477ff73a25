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

# The L2 simulation hook: extra columns, JSON fields, and its options' errors.
"$bin" model --l2-bytes 60M >"$work/l2" 2>"$work/err"
check "l2 sim exits 0" test $? -eq 0
check "l2 sim title" grep -q "simulated L2 of 60 MiB, 132 SMs × 2 CTAs, query-block-major" "$work/l2"
check "l2 sim columns" grep -q "FlashAttention, simulated L2.*Standard, simulated L2.*L2 hit (flash).*Heads/wave.*L2 for floor" "$work/l2"
check "l2 sim: one head reaches the floor" grep -q "4096 × 64  *136 MB  *34.6 MB  *2.1 MB  *2.1 MB" "$work/l2"
"$bin" model --seq 2048 --head-dim 128 --heads 4 --kv-heads 2 --causal --l2-bytes 0 --format json >"$work/l2.json"
check "l2 sim json, L2 0 = flash_no_l2" python3 -c "
import json; r=json.load(open('$work/l2.json'))['rows'][0]
assert r['bytes']['flash_l2_sim']==r['bytes']['flash_no_l2'], r
assert r['bytes']['standard_l2_sim']==r['bytes']['standard'], r
d=r['l2_sim']; assert d['l2_bytes']==0 and d['sm_count']==132 and d['ctas_per_sm']==2, d
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
expect_error "l2 sim too large" "L2 accesses" model --seq 16M --head-dim 64 --l2-bytes 1M

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

# --pass and --fa1 on model.
"$bin" model --pass bwd --seq 4096 --head-dim 64 --format json >"$work/bwd.json"
check "bwd json" python3 -c "import json; r=json.load(open('$work/bwd.json'))['rows'][0]; assert r['shape']['pass']=='bwd'; assert r['bytes']=={'standard':239075328,'flash_no_l2':107495424,'floor':4210688}, r['bytes']; assert r['flops']==10737418240"
"$bin" model --fa1 >"$work/fa1"
check "--fa1 column" grep -q "4096 × 64  *136 MB  *54 MB  *34.6 MB  *2.1 MB" "$work/fa1"
"$bin" model --pass fwd,bwd,fwdbwd --seq 4096 --head-dim 64 >"$work/passes"
check "pass column" grep -q "fwd + bwd  *375 MB  *142 MB  *6.31 MB" "$work/passes"
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

# Under a terminal: tmux with its own server, a 200 x 60 pane.
if command -v tmux >/dev/null 2>&1; then
  tsock="hbmscope-test-$$"
  tm() { tmux -L "$tsock" -f /dev/null "$@"; }
  # wait_for TEXT: poll the pane until TEXT shows (10 s at most)
  wait_for() {
    for _ in $(seq 100); do
      tm capture-pane -p -t t | grep -qF -- "$1" && return 0
      sleep 0.1
    done
    return 1
  }
  tm new-session -d -s t -x 200 -y 60 "env -u NO_COLOR TERM=xterm-256color bash --norc --noprofile"
  tm send-keys -t t "'$bin' walk --delay 300" Enter
  check "tmux walk: animates (a tile on chip)" wait_for "@@"
  check "tmux walk: status line" wait_for "Tile "
  tm capture-pane -p -e -t t >"$work/tmux-colour"
  check "tmux walk: colour on a terminal" grep -q "$esc\[" "$work/tmux-colour"
  tm send-keys -t t C-c
  tm send-keys -t t "clear; '$bin' walk --delay 1; echo walk-''ended" Enter
  check "tmux walk: reaches the end" wait_for "walk-ended"
  tm capture-pane -p -t t >"$work/tmux-walk"
  check "tmux walk: final frame drawn in place" test "$(grep -c 'FlashAttention-[12] order' "$work/tmux-walk")" -eq 1
  check "tmux walk: counters at their totals" grep -q "2,359,296 B  of  2,359,296 B" "$work/tmux-walk"
  tm send-keys -t t "clear; NO_COLOR=1 '$bin' walk --delay 1 --order fa1 --causal; echo fa1-''ended" Enter
  check "tmux walk fa1: reaches the end" wait_for "fa1-ended"
  tm capture-pane -p -e -t t >"$work/tmux-nocolour"
  check "tmux NO_COLOR: no colour" bash -c "! grep -q '$esc\[[0-9;]*m' '$work/tmux-nocolour'"
  check "tmux walk fa1: masked legend" grep -q "hidden by the causal mask" "$work/tmux-nocolour"
  tm send-keys -t t "clear; '$bin' softmax 3 1 4 1 5 9 2 6 --block 3 --delay 50; echo softmax-''ended" Enter
  check "tmux softmax: reaches the end" wait_for "softmax-ended"
  tm capture-pane -p -t t >"$work/tmux-softmax"
  check "tmux softmax: steps and result" grep -q "Largest difference" "$work/tmux-softmax"
  check "tmux softmax: three blocks" test "$(grep -c '^Block ' "$work/tmux-softmax")" -eq 3
  tm kill-server 2>/dev/null
fi
# measure: without a CUDA device (CI, this machine) one clear line and exit 1;
# with one, a measured table. Either way `model` is unaffected.
"$bin" measure --help >"$work/meashelp"
check "measure --help explains columns" grep -q "Measured/predicted" "$work/meashelp"
check "measure --help has examples" grep -q "hbmscope measure --seq" "$work/meashelp"
expect_error "measure bad kernels" "--kernels: 'cudnn' is not one of" measure --seq 128 --kernels cudnn
expect_error "measure bwd" "measure runs forward kernels only" measure --seq 128 --pass bwd
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
