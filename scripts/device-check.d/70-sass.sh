#!/usr/bin/env bash
# limit_s: 15
# The SASS of the kernels (cuobjdump, on the GPU machine: the build machine
# has none): per-kernel counts of the instructions that matter (HMMA, LDSM,
# LDGSTS, MUFU.EX2, BAR, STL/LDL for local memory) in results/sass-counts.txt,
# the full listings in results/sass/.
set -u
sum=$RESULTS/summary-sass.txt
objs=$(ls "$BUILD"/CMakeFiles/*.dir/src/cuda/*.cu.o 2>/dev/null)  # (the CUDA library's objects, whatever its target name)
if ! command -v cuobjdump >/dev/null 2>&1 || [ -z "$objs" ]; then
  echo "NO LOCAL MEMORY in any kernel (SASS): NOT MEASURED (cuobjdump or the objects missing)" >"$sum"
  exit 1
fi
mkdir -p "$RESULTS/sass"
for o in $objs; do cuobjdump -sass "$o" >"$RESULTS/sass/$(basename "$o" .o).sass" 2>&1; done
"$PY" "$REPO/scripts/sass_counts.py" "$RESULTS"/sass/*.sass >"$RESULTS/sass-counts.txt"
cat "$RESULTS/sass-counts.txt"
local_mem=$(awk 'NR > 1 && ($(NF-1) + $NF) > 0 {print $1}' "$RESULTS/sass-counts.txt" | paste -sd, -)
if [ -z "$local_mem" ]; then
  echo "NO LOCAL MEMORY in any kernel (SASS): MET (no STL/LDL; counts in results/sass-counts.txt)"
else
  echo "NO LOCAL MEMORY in any kernel (SASS): MISSED (STL/LDL in $local_mem)"
fi >"$sum"
