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
{
  cmake -S "$REPO" -B "$BUILD" "${gen[@]}" "${launcher[@]}" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DHBMSCOPE_WERROR=OFF -DHBMSCOPE_PTXAS_VERBOSE=ON -DHBMSCOPE_BENCH=OFF &&
    timeout $(( ${STEP_LIMIT_S:-120} - 8 )) cmake --build "$BUILD" -j"${BUILD_JOBS:-$(nproc)}" --target hbmscope hbmscope_gpu_tests
} >"$log" 2>&1 || rc=$?
# Kernel, registers, spills: one line per compiled entry.
awk '/Compiling entry function/ {match($0, /function .([^ ]*)./, m); k=m[1]}
     /bytes stack frame/ {sf=$0}
     /Used [0-9]+ registers/ {print k; print "    " sf; print "   " $0}' "$log" |
  sed 's/ptxas info *: //' >"$RESULTS/ptxas.txt"
warnings=$(grep -c -i 'warning' "$log")
spills=$(grep -E 'bytes spill stores' "$log" | grep -vc ' 0 bytes spill stores')
kernels=$(grep -c 'Compiling entry function' "$log")
if [ "$rc" -eq 0 ] && [ -x "$HBMSCOPE" ]; then
  v=MET; [ "$spills" -gt 0 ] && v=MISSED
  echo "BUILD sm_90, no spills: $v ($kernels kernels compiled, $spills with spills, $warnings warning lines; results/ptxas.txt)"
else
  why="build failed"; [ "$rc" -eq 124 ] && why="build stopped at $(( ${STEP_LIMIT_S:-120} - 8 )) s"
  echo "BUILD sm_90, no spills: MISSED ($why, rc $rc; last lines of results/build.log below)"
  tail -15 "$log" | sed 's/^/    /'
fi >"$RESULTS/summary-build.txt"
tail -5 "$log"
exit "$rc"
