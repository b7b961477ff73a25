# Sourced by the step files that may also run on their own (a dry run, a
# rerun of one step): the environment the runner gives them, with defaults.
# Not a step (the runner runs NN-name.sh files only).
set -uo pipefail
REPO=${REPO:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
HBMSCOPE=${HBMSCOPE:-$REPO/build/hbmscope}
PY=${PY:-python3}
RESULTS=${RESULTS:-$REPO/device-out/results}
NCU=${NCU:-ncu}
mkdir -p "$RESULTS"
