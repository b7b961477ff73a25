#!/usr/bin/env bash
# limit_s: 90
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
# B,L groups: one hbmscope run each (its own copy probe), so a crash loses one group.
groups=("32,64 4096" "8,16 32768" "1,2 131072")
reports=()
i=0
for g in "${groups[@]}"; do
  read -r batches len <<<"$g"
  i=$((i + 1))
  f=$out/decode-measure-$i.json
  echo "== hbmscope measure --decode --batch $batches --seq-kv $len"
  timeout 20 "$HBMSCOPE" "${common[@]}" --batch "$batches" --seq-kv "$len" --output "$f" 2>&1 |
    grep -v "^hbmscope: measuring" | tail -20
  [ -f "$f" ] && reports+=("$f")
done

echo "== PyTorch SDPA decode"
timeout 35 "$PY" "$REPO/scripts/sdpa_decode_peer.py" --shapes 32x4096 64x4096 8x32768 16x32768 1x131072 2x131072 \
  --heads 32 --kv-heads 8 --head-dim 128 --repeats 20 --json "$out/sdpa-decode.json" 2>&1 | tail -20

"$PY" "$REPO/scripts/decode_summary.py" --sdpa "$out/sdpa-decode.json" "${reports[@]}" >"$out/decode-summary-full.txt" 2>&1
grep -E "^[a-z-]+: (MET|MISSED|NOT MEASURED)" "$out/decode-summary-full.txt" >"$out/summary-decode.txt" ||
  echo "decode-kv-bandwidth: NOT MEASURED (scripts/decode_summary.py failed; see decode-summary-full.txt)" \
    >"$out/summary-decode.txt"
cat "$out/decode-summary-full.txt"
