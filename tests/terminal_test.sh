#!/usr/bin/env bash
# hbmscope on a terminal: animations under tmux, the progress bar and the long
# walk under script(1). Each group sets its own TERM (ctest may run with
# TERM=dumb or none) and is skipped, with the reason on stdout, where no
# pseudo-terminal can be opened (a container without /dev/pts): never a failure
# or a long poll. tests/headless_test.sh runs this file with the terminals hidden.
source "$(dirname "$0")/lib.sh"
esc=$(printf '\033')

# skip NAME REASON: a group of checks that cannot run here, said on stdout.
skipped=0
skip() { echo "SKIP: $1: $2"; skipped=$((skipped + 1)); }
# Whether a pseudo-terminal can be opened (the terminal tests need one).
pty_reason=
if ! command -v script >/dev/null 2>&1; then
  pty_reason="script(1) is not installed"
elif ! timeout 10 script -qec true /dev/null </dev/null >/dev/null 2>&1; then
  pty_reason="no pseudo-terminal can be opened (no /dev/pts?)"
fi
# A terminal for `script`: its own TERM, whatever ctest was given.
on_tty() { TERM=xterm-256color script -qec "$1" /dev/null </dev/null; }

# Under a terminal: tmux with its own server, a 200 x 60 pane. These tests set
# their own TERM (ctest may run with TERM=dumb or none) and are skipped, with
# the reason, where no pseudo-terminal can be opened (a container without
# /dev/pts), instead of failing or polling.
if [ -z "$pty_reason" ] && ! command -v tmux >/dev/null 2>&1; then
  skip "tmux terminal tests" "tmux is not installed"
elif [ -n "$pty_reason" ]; then
  skip "tmux terminal tests" "$pty_reason"
elif ! TERM=xterm-256color tmux -L "hbmscope-test-$$" -f /dev/null new-session -d -s t -x 200 -y 60 \
       "env -u NO_COLOR TERM=xterm-256color bash --norc --noprofile" 2>"$work/tmux_err"; then
  skip "tmux terminal tests" "tmux cannot start a session: $(head -1 "$work/tmux_err")"
else
  tsock="hbmscope-test-$$"
  tm() { TERM=xterm-256color tmux -L "$tsock" -f /dev/null "$@"; }
  # wait_for TEXT: poll the pane until TEXT shows (10 s at most)
  wait_for() {
    for _ in $(seq 100); do
      tm has-session -t t 2>/dev/null || return 1  # the pane is gone: no point polling
      tm capture-pane -p -t t | grep -qF -- "$1" && return 0
      sleep 0.1
    done
    return 1
  }
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
# Progress bar on a terminal for long sweeps, none for short ones.
if [ -z "$pty_reason" ]; then
  on_tty "'$bin' sweep --seq 1:150K:+1 --head-dim 64 --format csv >/dev/null" >"$work/prog_tty" 2>&1
  check "progress bar on a terminal" grep -q "hbmscope sweep \[" "$work/prog_tty"
  on_tty "'$bin' sweep --config seed >/dev/null" >"$work/prog_short" 2>&1
  check "no progress bar for a short sweep" test ! -s "$work/prog_short"
else
  skip "progress bar on a terminal" "$pty_reason"
fi

# walk on a terminal: a long walk draws one tile in N and ends in bounded time.
if [ -z "$pty_reason" ]; then
  timeout 60 bash -c "TERM=xterm-256color script -qec \"'$bin' walk --seq 8K --delay 1\" /dev/null </dev/null" >"$work/walk_long" 2>&1
  check "long walk ends" test $? -eq 0
  check "long walk says it skips tiles" grep -aq "4096 tiles at 1 ms a frame would take 4.1 s; drawing one tile in 3" "$work/walk_long"
  check "long walk reaches the totals" grep -aq "All 4,096 tiles done\|All 4096 tiles done" "$work/walk_long"
  timeout 20 bash -c "TERM=xterm-256color script -qec \"'$bin' walk --delay 1\" /dev/null </dev/null" >"$work/walk_short" 2>&1
  check "short walk: every tile, no note" bash -c "! grep -aq 'drawing one tile in' '$work/walk_short'"
else
  skip "walk on a terminal" "$pty_reason"
fi

echo "$pass passed, $fails failed, $skipped groups skipped"
test "$fails" -eq 0
