# Sourced by the CLI test scripts (bash tests/NAME_test.sh BINARY): the binary
# as an absolute path (some checks cd), a scratch folder removed on exit, and
# the checks every script counts with. A script ends with `finish`.
set -u
bin=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
tests_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fails=0
pass=0
# Where expect_error and expect_exit keep the command's output (a script that
# uses $work/out for something else points these elsewhere).
run_out=$work/out
run_err=$work/err
# A file that a refused command must not leave behind (a report's --output).
no_file_after_error=

check() {  # check NAME CONDITION...
  local name=$1; shift
  if "$@"; then pass=$((pass + 1)); else echo "FAIL: $name"; fails=$((fails + 1)); fi
}

# The checks of a refused command: exit status (a number, or "nonzero": any
# but 0 and 3, the internal error), an empty stdout, one stderr line holding
# the given words, no file left where no_file_after_error names one.
refused_as() {
  local name=$1 want_rc=$2 want=$3; shift 3
  [ -n "$no_file_after_error" ] && rm -f "$no_file_after_error"
  timeout 120 "$bin" "$@" >"$run_out" 2>"$run_err"
  local rc=$?
  if [ "$want_rc" = nonzero ]; then
    check "$name: non-zero exit" test "$rc" -ne 0
    check "$name: not an internal error" test "$rc" -ne 3
  else
    check "$name: exit $want_rc (got $rc)" test "$rc" -eq "$want_rc"
  fi
  check "$name: stdout empty" test ! -s "$run_out"
  check "$name: one stderr line" test "$(wc -l <"$run_err")" -eq 1
  [ -n "$no_file_after_error" ] && check "$name: no file left" test ! -e "$no_file_after_error"
  if ! grep -qF -- "$want" "$run_err"; then
    echo "FAIL: $name: stderr lacks '$want': $(cat "$run_err")"; fails=$((fails + 1))
  else pass=$((pass + 1)); fi
}

# expect_error NAME 'stderr words' ARGS...: refused with any exit status but 0 and 3
expect_error() { local name=$1; shift; refused_as "$name" nonzero "$@"; }
# expect_exit NAME RC 'stderr words' ARGS...: refused with exit status RC
expect_exit() { refused_as "$@"; }
# The widest line of a file, in characters (tables fit 120 columns).
maxw() { python3 -c "import sys; print(max(len(l.rstrip('\n')) for l in open(sys.argv[1], encoding='utf-8')))" "$1"; }

finish() {
  echo "$pass passed, $fails failed"
  test "$fails" -eq 0
}
