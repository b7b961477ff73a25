#!/usr/bin/env bash
# limit_s: 50
# PyTorch SDPA (flash and cuDNN backends, BF16) on measure's shapes with the
# same timing method; the JSON is rewritten after every shape. Needs no build.
set -u
exec "$PY" "$REPO/scripts/sdpa_peer.py" --seq 4096 8192 --head-dim 64 128 --batch 4 --heads 16 --repeats 20 \
  --json "$RESULTS/sdpa.json"
