#!/usr/bin/env bash
# tests/terminal_test.sh where users' CI runs it: no /dev/pts, TERM=dumb, no
# controlling terminal, stdin from /dev/null. The pseudo-terminals are hidden in
# a private mount namespace (an empty /dev/pts, /dev/ptmx bound to /dev/null),
# which needs root and unshare(1): skipped (77) otherwise. Every terminal group
# must then be skipped with its reason, and the script must pass.
set -u
term_test=$(cd "$(dirname "$0")" && pwd)/terminal_test.sh
if [ "$(id -u)" -ne 0 ] || ! command -v unshare >/dev/null 2>&1 || ! unshare -m true 2>/dev/null; then
  echo "SKIP: hiding /dev/pts needs root and unshare -m"
  exit 77
fi
out=$(mktemp)
trap 'rm -f "$out"' EXIT
TERM=dumb setsid unshare -m bash -c \
  'mount -t tmpfs none /dev/pts && mount --bind /dev/null /dev/ptmx && exec bash "$0" "$1"' \
  "$term_test" "$1" </dev/null >"$out" 2>&1
rc=$?
cat "$out"
fails=0
fail() { echo "FAIL: $1"; fails=$((fails + 1)); }
[ "$rc" -eq 0 ] || fail "terminal_test.sh exits $rc without terminals"
for group in "tmux terminal tests" "progress bar on a terminal" "walk on a terminal"; do
  grep -q "^SKIP: $group: no pseudo-terminal can be opened" "$out" || fail "'$group' not skipped with its reason"
done
grep -q "^FAIL" "$out" && fail "a check failed instead of being skipped"
test "$fails" -eq 0
