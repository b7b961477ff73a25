#!/usr/bin/env bash
# limit_s: 90
# (memcheck 15 s + racecheck 10 + measure 3 x 13 + PyTorch 25 = 89 s if every part runs to its limit)
# Decode attention (issue 13): our split-KV decode kernels, contiguous and
# paged (page 16), on Llama-3 8B-like decode shapes (32 query / 8 kv heads,
# d 128, one new token; B x L = 32x4K .. 2x128K, four of them with B*L >= 256K
# tokens), each validated against the CPU reference before it is timed; then
# PyTorch SDPA (flash and cuDNN backends, enable_gqa) on the same shapes with
# the same timing (L2 flush, events, median). Verdicts for the two targets
# (KV bandwidth >= 80 % of the copy's, >= 1.0x PyTorch's flash decode) go to
# $RESULTS/summary-decode.txt (scripts/decode_summary.py).
# Environment (scripts/device-check.sh): REPO, HBMSCOPE, PY, RESULTS.
set -uo pipefail
: "${REPO:?}" "${HBMSCOPE:?}" "${PY:?}" "${RESULTS:?}"
out=$RESULTS
common=(measure --decode --seq 1 --heads 32 --kv-heads 8 --head-dim 128 --kernels decode,decode_paged
        --repeats 20 --warmup 3 --format json)
# Out-of-bounds accesses first, on small ragged causal GQA shapes through odd pages
# and uneven splits (compute-sanitizer works on Firecracker machines, not gVisor).
echo "== compute-sanitizer memcheck, decode kernels"
memcheck="decode-memcheck: NOT MEASURED (compute-sanitizer missing or refused the device; see the step log)"
if command -v compute-sanitizer >/dev/null; then
  timeout 15 compute-sanitizer --tool memcheck --error-exitcode 9 "$HBMSCOPE" measure --context-lengths 300,2,77 \
    --seq 2 --heads 8 --kv-heads 2 --head-dim 64,128 --causal --splits 1,3 --page-size 7 \
    --kernels decode,decode_paged --repeats 1 --warmup 0 --format csv >"$out/decode-memcheck.log" 2>&1
  rc=$?
  tail -5 "$out/decode-memcheck.log"
  if [ $rc -eq 0 ]; then memcheck="decode-memcheck: MET (no memory error; 2 head dims x 2 split counts x 2 kernels)"
  elif [ $rc -eq 9 ]; then memcheck="decode-memcheck: MISSED (memory errors: decode-memcheck.log)"
  else memcheck="decode-memcheck: NOT MEASURED (rc $rc: decode-memcheck.log)"; fi
fi
# Shared-memory races (the cp.async stages, the warps' merge) on one small shape.
if command -v compute-sanitizer >/dev/null; then
  echo "== compute-sanitizer racecheck, decode kernels"
  timeout 10 compute-sanitizer --tool racecheck --error-exitcode 9 "$HBMSCOPE" measure --context-lengths 700,90 \
    --seq 4 --heads 16 --kv-heads 2 --head-dim 128 --splits 2 --page-size 16 --kernels decode,decode_paged \
    --repeats 1 --warmup 0 --format csv >"$out/decode-racecheck.log" 2>&1
  rc=$?
  tail -3 "$out/decode-racecheck.log"
  if [ $rc -eq 0 ]; then racecheck="decode-racecheck: MET (no shared-memory hazard)"
  elif [ $rc -eq 9 ]; then racecheck="decode-racecheck: MISSED (hazards: decode-racecheck.log)"
  else racecheck="decode-racecheck: NOT MEASURED (rc $rc: decode-racecheck.log)"; fi
else
  racecheck="decode-racecheck: NOT MEASURED (no compute-sanitizer)"
fi
# B,L groups: one hbmscope run each (its own copy probe), so a crash loses one group.
groups=("32,64 4096" "8,16 32768" "1,2 131072")
reports=()
i=0
for g in "${groups[@]}"; do
  read -r batches len <<<"$g"
  i=$((i + 1))
  f=$out/decode-measure-$i.json
  echo "== hbmscope measure --decode --batch $batches --seq-kv $len"
  timeout 13 "$HBMSCOPE" "${common[@]}" --batch "$batches" --seq-kv "$len" --output "$f" 2>&1 |
    grep -v "^hbmscope: measuring" | tail -20
  [ -f "$f" ] && reports+=("$f")
done

echo "== PyTorch SDPA decode"
timeout 25 "$PY" "$REPO/scripts/sdpa_decode_peer.py" --shapes 32x4096 64x4096 8x32768 16x32768 1x131072 2x131072 \
  --heads 32 --kv-heads 8 --head-dim 128 --repeats 20 --json "$out/sdpa-decode.json" 2>&1 | tail -20

"$PY" "$REPO/scripts/decode_summary.py" --sdpa "$out/sdpa-decode.json" "${reports[@]}" >"$out/decode-summary-full.txt" 2>&1
grep -E "^[a-z-]+: (MET|MISSED|NOT MEASURED)" "$out/decode-summary-full.txt" >"$out/summary-decode.txt" ||
  echo "decode-kv-bandwidth: NOT MEASURED (scripts/decode_summary.py failed; see decode-summary-full.txt)" \
    >"$out/summary-decode.txt"
printf '%s\n' "$memcheck" "$racecheck" >>"$out/summary-decode.txt"
cat "$out/decode-summary-full.txt"
printf '%s\n' "$memcheck" "$racecheck"
