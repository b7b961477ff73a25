#!/usr/bin/env bash
# `measure` and `sweep --measure` on issue 19's shapes as a user meets them: a
# shape no kernel of ours runs (--head-dim-v, MLA, --kv-dtype, --seq-lens,
# --chunk for the flash kernels) is refused in one line on stderr, exit 1,
# nothing on stdout, before any device work (so the refusal, never the "no CUDA
# device" line); a sliding window is taken by every kernel (without a device:
# the no-device line; with one: a measured table whose shape names the window).
# Exits 77 (skipped) when this hbmscope has no --window yet.
source "$(dirname "$0")/lib.sh"

if ! "$bin" measure --help 2>/dev/null | grep -q -- "--window"; then
  echo "SKIPPED: this hbmscope has no --window (issue 19's shape options)"
  exit 77
fi

# refused NAME 'what' ARGS...: exit 1, stdout empty, one stderr line
# "hbmscope: error: measure: our kernels do not run WHAT... (kernel K, shape S); ...".
refused() {
  local name=$1 want=$2; shift 2
  "$bin" "$@" >"$work/out" 2>"$work/err"
  local rc=$?
  check "$name: exit 1" test "$rc" -eq 1
  check "$name: stdout empty" test ! -s "$work/out"
  check "$name: one stderr line" test "$(wc -l <"$work/err")" -eq 1
  check "$name: the refusal, before any device" grep -qF "hbmscope: error: measure: our kernels do not run $want" "$work/err"
  [ "$fails" -eq 0 ] || cat "$work/err"
}

refused "DV != d" "a V head dim other than --head-dim (--head-dim-v 64 against 128) (kernel flash, shape" \
  measure --seq 256 --head-dim 128 --head-dim-v 64 --kernels flash
refused "KV cache in fp8" "K and V in a dtype of their own (--kv-dtype fp8; they read bf16) (kernel standard" \
  measure --seq 256 --head-dim 128 --kv-dtype fp8
refused "MLA decode" "a latent KV (MLA): they read K and V heads of their own (kernel decode" \
  measure --decode --seq 1 --seq-kv 4096 --heads 16 --mla 512,64
refused "ragged prefill" "ragged prefill batches (--seq-lens" measure --seq-lens 512,1024 --head-dim 64
refused "chunks in the flash kernels" "chunked attention (--chunk) in the flash kernels" \
  measure --seq 1024 --head-dim 64 --causal --chunk 256
refused "sweep --measure refuses too" "K and V in a dtype of their own" \
  sweep --seq 256 --head-dim 64 --kv-dtype fp8 --measure --repeats 1
refused "a refused shape among taken ones" "chunked attention (--chunk) in the flash kernels (the standard path and the decode kernels run it) (kernel flash_v1" \
  measure --seq 1024 --head-dim 64 --causal --chunk 0,256 --kernels flash_v1

# Taken: windows everywhere, chunks in the standard path and the decode kernels.
device=1
"$bin" measure --seq 64 --head-dim 64 --repeats 1 --kernels floor >/dev/null 2>"$work/err" || device=0
taken() {  # NAME 'what a measured table shows' ARGS...
  local name=$1 want=$2; shift 2
  "$bin" "$@" --repeats 2 >"$work/out" 2>"$work/err"
  local rc=$?
  if [ "$device" -eq 1 ]; then
    check "$name: measured" test "$rc" -eq 0
    check "$name: the table names the shape's mask" grep -q -- "$want" "$work/out"
  else
    check "$name: exit 1 for want of a device" test "$rc" -eq 1
    check "$name: the no-device line, not a refusal" grep -q "^hbmscope: error: no CUDA device" "$work/err"
  fi
}
taken "a window" "window 256" measure --seq 1024 --head-dim 64 --causal --window 256
taken "windows as an axis" "window 128" measure --seq 512 --head-dim 128 --causal --window 0,128 --kernels flash,flash_v1
taken "chunks in the standard path" "chunk 256" measure --seq 1024 --head-dim 64 --causal --chunk 256 \
  --kernels standard,softmax
taken "a windowed decode step" "window 512" measure --decode --seq 2 --seq-kv 4096 --heads 8 --kv-heads 2 \
  --head-dim 128 --causal --window 512
taken "a chunked decode step" "chunk 1024" measure --decode --seq 1 --seq-kv 5000 --heads 8 --kv-heads 2 \
  --head-dim 64 --causal --chunk 1024
taken "sweep --measure with a window" "window 64" sweep --seq 256 --head-dim 64 --causal --window 64 --measure

echo "measure_cli: $pass passed, $fails failed"
[ "$fails" -eq 0 ]
