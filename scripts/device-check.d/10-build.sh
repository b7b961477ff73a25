#!/usr/bin/env bash
# limit_s: 120
# Configure and build only what the check runs (the CLI and the GPU tests),
# for sm_90, warnings not fatal (the GPU machine's compiler may be newer than
# CI's), ptxas's resource report kept (results/ptxas.txt).
set -u
log=$RESULTS/build.log
gen=()
command -v ninja >/dev/null 2>&1 && [ ! -f "$BUILD/Makefile" ] && gen=(-G Ninja)
launcher=()
command -v ccache >/dev/null 2>&1 && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
rc=0
# Stop the build 6 s before the step's limit, so that the summary below is written.
deadline=$(( $(date +%s) + ${STEP_LIMIT_S:-120} - 6 ))
{
  cmake -S "$REPO" -B "$BUILD" "${gen[@]}" "${launcher[@]}" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DHBMSCOPE_WERROR=OFF -DHBMSCOPE_PTXAS_VERBOSE=ON -DHBMSCOPE_BENCH=OFF -DHBMSCOPE_SANITIZER_SUITE=OFF &&
    timeout $(( deadline - $(date +%s) > 1 ? deadline - $(date +%s) : 1 )) cmake --build "$BUILD" -j"${BUILD_JOBS:-$(nproc)}" --target hbmscope hbmscope_gpu_tests
} >"$log" 2>&1 || rc=$?
# Kernel, registers, spills: one line per compiled entry.
sed -n -e "s/.*Compiling entry function '\([^']*\)'.*/\1/p" -e 's/^ *\([0-9]* bytes stack frame.*\)/    \1/p' \
  -e 's/.*\(Used [0-9]* registers.*\)/    \1/p' "$log" >"$RESULTS/ptxas.txt"
warnings=$(grep -c -i 'warning' "$log")
spills=$(grep -E 'bytes spill stores' "$log" | grep -vc ' 0 bytes spill stores')
kernels=$(grep -c 'Compiling entry function' "$log")
if [ "$rc" -eq 0 ] && [ -x "$HBMSCOPE" ]; then
  v=MET; [ "$spills" -gt 0 ] && v=MISSED
  echo "BUILD sm_90, no spills: $v ($kernels kernels compiled, $spills with spills, $warnings warning lines; results/ptxas.txt)"
else
  why="build failed"; [ "$rc" -eq 124 ] && why="build stopped at the step's limit"
  echo "BUILD sm_90, no spills: MISSED ($why, rc $rc; last lines of results/build.log below)"
  tail -15 "$log" | sed 's/^/    /'
fi >"$RESULTS/summary-build.txt"
# launch_plan.cpp's register table (CTAs/SM, docs) against this compiler's.
"$PY" "$REPO/scripts/ptxas_check.py" "$RESULTS/ptxas.txt" "$REPO/src/cuda/launch_plan.cpp" >>"$RESULTS/summary-build.txt" 2>&1
tail -5 "$log"
exit "$rc"
