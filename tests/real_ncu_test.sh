#!/usr/bin/env bash
# `hbmscope reconcile` over every file of the real-captures folder (issue 18):
# each reconciles (a report on stdout, only "hbmscope: ..." lines on stderr)
# or is refused in one line. The captures come from public repositories (their
# origin and licences in the folder's SOURCES.md) and stay outside this
# repository: where the folder is missing the test is skipped, saying so.
#   real_ncu_test.sh HBMSCOPE [FOLDER]   (FOLDER: $HBMSCOPE_REAL_NCU, else ../shared/real-ncu)
source "$(dirname "$0")/lib.sh"
dir=${HBMSCOPE_REAL_NCU:-${2:-$(dirname "$0")/../../shared/real-ncu}}
if [ ! -d "$dir" ]; then
  echo "SKIPPED: no folder of real captures at '$dir' (set HBMSCOPE_REAL_NCU or -DHBMSCOPE_REAL_NCU_DIR)"
  exit 77
fi
files=0

# The shapes SOURCES.md gives for the captures it describes (by file name).
shape_of() {
  case "$(basename "$1")" in
    09-a100-details2021-fa1-fmha-gpt2.csv) echo "--seq 32 --head-dim 64 --batch 2 --heads 12 --dtype fp16 --device a100" ;;
    10-a100-details2021-standard-mha-bert.csv) echo "--seq 20 --head-dim 32 --batch 2 --heads 8 --dtype fp32 --device a100" ;;
    01-b200-details-cublaslt-gemm.csv) echo "--device b200" ;;
    *) echo "" ;;
  esac
}

for f in "$dir"/*; do
  [ -f "$f" ] || continue
  case "$f" in *.md) continue ;; esac
  files=$((files + 1))
  name=$(basename "$f")
  # shellcheck disable=SC2046
  timeout 120 "$bin" reconcile "$f" $(shape_of "$f") >"$work/out" 2>"$work/err"
  rc=$?
  if [ "$rc" -eq 0 ]; then
    check "$name: a report" grep -q "attention call(s) from" "$work/out"
    check "$name: stderr only notes" test "$(grep -cv '^hbmscope: ' "$work/err")" -eq 0
    echo "$name: $(head -1 "$work/out")"
  else
    check "$name: refused with exit 1 or 2 (got $rc)" test "$rc" -eq 1 -o "$rc" -eq 2
    check "$name: refused in one line" test "$(wc -l <"$work/err")" -eq 1
    check "$name: nothing on stdout" test ! -s "$work/out"
    echo "$name: refused: $(cat "$work/err")"
  fi
  # What SOURCES.md says each of the known captures holds.
  case "$name" in
    09-*)
      check "09: one flash call" grep -qE "^ +1 +flash +fmha_fwd_loop_kernel" "$work/out"
      check "09: at the floor" grep -qE "AT FLOOR$" "$work/out"
      check "09: read+write counted 296 kB" grep -q "296 kB" "$work/out"
      check "09: time derived from cycles" grep -q "~9.34 µs" "$work/out" ;;
    10-*)
      check "10: one standard call of three kernels" grep -qE "^ +1 +standard +GEMM, softmax, GEMM \(3 kernels\)" "$work/out"
      check "10: matches the standard model" grep -qE "MATCHES$" "$work/out" ;;
    01-*)
      check "01: no attention call" grep -q "^0 attention call(s) from 1 launch(es)" "$work/out"
      check "01: the GEMM listed with its time" grep -q "cutlass3x_sm100_tensorop.* (gemm) × 1, 406 µs" "$work/out" ;;
  esac
done
check "some captures in $dir" test "$files" -gt 0

# docs/reconcile.md shows each known capture reconciled, under its repository's
# file name: the commands there still print what it shows.
docs=$(cd "$(dirname "$0")/.." && pwd)/docs/reconcile.md
for pair in "09-a100-details2021-fa1-fmha-gpt2.csv gpt2_flashattn_nsight.csv" \
            "10-a100-details2021-standard-mha-bert.csv bert_torch_nsight.csv" \
            "01-b200-details-cublaslt-gemm.csv cublaslt_ncu.log"; do
  set -- $pair
  [ -f "$dir/$1" ] || continue
  cp "$dir/$1" "$work/$2"
  cmd=$(grep -m1 "^\$ hbmscope reconcile $2 " "$docs" | sed 's/^\$ hbmscope //')
  # shellcheck disable=SC2086
  (cd "$work" && "$bin" $cmd) >"$work/now" 2>&1
  sed -n "/^\$ hbmscope reconcile $2 /,/^\`\`\`/p" "$docs" | sed '1d;$d' >"$work/then"
  check "docs/reconcile.md shows what '$cmd' prints" cmp -s "$work/now" "$work/then"
done
echo "real ncu: $files file(s), $pass passed, $fails failed"
test "$fails" -eq 0
