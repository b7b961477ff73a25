#!/usr/bin/env bash
# limit_s: 10
# The speed targets from measure's reports and the PyTorch peer's JSON:
# flash v2 and v1 >= 1.0x PyTorch flash (cuDNN shown), softmax >= 0.90 and
# floor >= 0.95 of the measured copy; MET, MISSED or NOT MEASURED each.
set -u
shopt -s nullglob
py=$PY
command -v "$py" >/dev/null 2>&1 || py=python3
"$py" "$REPO/scripts/device_summary.py" --sdpa "$RESULTS/sdpa.json" "$RESULTS"/measure-*.json \
  --window "$RESULTS"/window-*.json >"$RESULTS/summary-targets.txt" 2>&1
rc=$?
cat "$RESULTS/summary-targets.txt"
exit "$rc"
