#!/usr/bin/env bash
# limit_s: 50
# PyTorch SDPA (flash and cuDNN backends, BF16) on measure's shapes with the
# same timing method; the JSON is rewritten after every shape. Needs no build.
set -u
"$PY" "$REPO/scripts/sdpa_peer.py" --seq 4096 8192 --head-dim 64 128 --batch 4 --heads 16 --repeats 20 \
  --json "$RESULTS/sdpa.json" 2>&1 | tee "$RESULTS/sdpa.log"
rc=${PIPESTATUS[0]}
n=$(grep -c '"status": "ok"' "$RESULTS/sdpa.json" 2>/dev/null)
if [ "$rc" -eq 0 ]; then
  echo "PYTORCH SDPA (flash, cuDNN; 8 shapes): MET (${n:-0} of 16 runs ok; results/sdpa.json)"
else
  echo "PYTORCH SDPA (flash, cuDNN; 8 shapes): NOT MEASURED (rc $rc, ${n:-0} runs ok: $(grep -m1 -E 'Error|error' "$RESULTS/sdpa.log" | cut -c1-160))"
fi >"$RESULTS/summary-sdpa.txt"
exit "$rc"
