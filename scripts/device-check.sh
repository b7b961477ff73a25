#!/usr/bin/env bash
# The whole GPU check in one device call. Each step has its own time limit
# (build 140 s, GPU tests 90, memcheck 40, racecheck 30, synccheck 30,
# measure 2 x 45, PyTorch 60: 8 minutes even if every step runs to its limit;
# not yet run on a GPU):
#   1. configure + build for sm_90 with ninja (ptxas resource report in build.log)
#   2. the GPU tests (ctest -L gpu): every kernel against the CPU reference
#   3. compute-sanitizer memcheck on small ragged/causal/GQA shapes, and
#      racecheck + synccheck of the flash kernel (cp.async groups, barriers)
#   4. hbmscope measure at 4096 and 8192 x head dim 64 and 128, causal and not
#   5. PyTorch SDPA (flash and cuDNN backends, BF16) on the same shapes, same timing
#   6. a short table last (scripts/device_summary.py)
# Everything is logged under $OUT (at most 8 files come back).
#
# Needs .device-deps (../shared/device/pack-deps.sh, run here first) carried:
#   run(command="bash scripts/device-check.sh", carry=[".device-deps"], timeout_s=540)
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
out=${OUT:-$root/device-out}
mkdir -p "$out"
deps=$root/.device-deps/usr
if [ ! -d "$deps" ]; then
  echo "device-check: $deps is missing: run ../shared/device/pack-deps.sh and carry .device-deps" >&2
  exit 1
fi
export LD_LIBRARY_PATH=$deps/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PYTHONUNBUFFERED=1
export PATH=/usr/local/cuda/bin:$PATH
t0=$(date +%s)
log=$out/run.log
step() { echo "== $* (t = $(( $(date +%s) - t0 )) s)" | tee -a "$log"; }
status=()

step "device"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv >>"$log" 2>&1
nvcc --version | tail -2 >>"$log" 2>&1

step "build"
if ! { cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$deps" \
         -DCMAKE_CUDA_ARCHITECTURES=90 -DHBMSCOPE_PTXAS_VERBOSE=ON -DHBMSCOPE_BENCH=OFF &&
       timeout "${BUILD_TIMEOUT:-140}" cmake --build build-gpu -j"${BUILD_JOBS:-16}"; } >"$out/build.log" 2>&1; then
  tail -40 "$out/build.log"
  echo "device-check: build failed (build.log)"
  exit 1
fi
grep -E "Compiling entry|Used [0-9]+ registers|spill" "$out/build.log" | sed 's/ptxas info *: //' >>"$log"
bin=build-gpu/hbmscope

step "gpu tests"
timeout 90 ctest --test-dir build-gpu -L gpu -j3 --output-on-failure >>"$log" 2>&1
status+=("gpu tests rc=$?")

step "memcheck"
# compute-sanitizer works on Firecracker machines, not under gVisor ("Device not supported"): see run.log.
timeout 40 compute-sanitizer --tool memcheck --error-exitcode 9 "$bin" measure --seq 300 --seq-kv 513 \
  --head-dim 64,128 --heads 4 --kv-heads 2 --causal --repeats 1 --warmup 0 --kernels standard,flash,floor \
  >>"$log" 2>&1
status+=("memcheck rc=$?")
for tool in racecheck synccheck; do
  timeout 30 compute-sanitizer --tool $tool --error-exitcode 9 "$bin" measure --seq 200 --seq-kv 333 \
    --head-dim 64,128 --heads 2 --kv-heads 1 --causal --repeats 1 --warmup 0 --kernels flash >>"$log" 2>&1
  status+=("$tool rc=$?")
done

step "measure"
shapes=(--seq 4096,8192 --head-dim 64,128 --batch 4 --heads 16)
timeout 45 "$bin" measure "${shapes[@]}" --format json --output "$out/measure.json" >>"$log" 2>&1
status+=("measure rc=$?")
timeout 45 "$bin" measure "${shapes[@]}" --causal --format json --output "$out/measure-causal.json" >>"$log" 2>&1
status+=("measure causal rc=$?")

step "pytorch sdpa"
timeout 60 python3 scripts/sdpa_peer.py --seq 4096 8192 --head-dim 64 128 --batch 4 --heads 16 \
  --repeats 20 --json "$out/sdpa.json" >>"$log" 2>&1
status+=("sdpa rc=$?")

step "summary"
python3 scripts/device_summary.py "$out/sdpa.json" "$out/measure.json" "$out/measure-causal.json" \
  >"$out/summary.txt" 2>&1
# The readable tables too (the JSON holds every sample).
for f in measure measure-causal; do
  [ -f "$out/$f.json" ] && python3 - "$out/$f.json" >>"$out/summary.txt" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
for row in r["rows"]:
    s = row["shape"]
    for m in row.get("measurements", []):
        t = m["time_s"]["median"]
        print(f"{s['seq_q']}x{s['head_dim']} causal={s['causal']} {m['kernel']:8s} {m['status']:7s} "
              f"{t*1e3:9.3f} ms  {m['bandwidth_Bps']/1e9:8.1f} GB/s  {100*m['copy_fraction']:5.1f}% copy  "
              f"{m['tflops']:6.1f} TFLOP/s  err {m['rel_error']}  {m['reason']}")
EOF
done
echo "== done in $(( $(date +%s) - t0 )) s: ${status[*]}" | tee -a "$log"
cat "$out/summary.txt"
