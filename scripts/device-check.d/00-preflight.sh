#!/usr/bin/env bash
# limit_s: 15
# Versions of every tool the check uses and the GPU's clocks, before anything
# long runs (a missing tool is logged, not fatal).
set -u
o=$RESULTS/preflight.txt
v() { # name, command...
  local name=$1; shift
  if command -v "$1" >/dev/null 2>&1; then
    printf '%-18s %s\n' "$name:" "$(timeout 10 "$@" 2>&1 | grep -v '^$' | tr '\n' ' ' | cut -c1-220)"
  else
    printf '%-18s not found\n' "$name:"
  fi
}
{
  echo "date:              $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "host:              $(uname -srm), $(nproc) cores"
  v gcc gcc --version
  v cmake cmake --version
  v ninja ninja --version
  v nvcc nvcc --version
  h=$(ls /usr/local/cuda/include/cublas_api.h /usr/include/cublas_api.h 2>/dev/null | head -1)
  if [ -n "$h" ]; then
    printf '%-18s %s\n' "cuBLAS:" "$(grep -E '#define CUBLAS_VER_(MAJOR|MINOR|PATCH)' "$h" | awk '{print $3}' | paste -sd.)"
  else
    printf '%-18s not found\n' "cuBLAS:"
  fi
  v compute-sanitizer compute-sanitizer --version
  ncu_bin=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | tail -1)
  if [ -n "$ncu_bin" ]; then v ncu "$ncu_bin" --version; else printf '%-18s not found\n' "ncu:"; fi
  v cuobjdump cuobjdump --version
  printf '%-18s %s\n' "python:" "$PY ($("$PY" --version 2>&1))"
  printf '%-18s %s\n' "torch:" "$(timeout 20 "$PY" -c 'import torch; print(torch.__version__, "cuda", torch.version.cuda, "cudnn", torch.backends.cudnn.version(), "device", torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none")' 2>&1 | tail -1)"
  if command -v nvidia-smi >/dev/null 2>&1; then
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem,clocks.max.sm,clocks.max.mem,temperature.gpu,power.draw,power.limit,persistence_mode,compute_mode --format=csv 2>&1
    nvidia-smi -q -d CLOCK 2>&1 | grep -E 'Graphics|SM|Memory|Applications|Default' | head -20
  else
    echo "nvidia-smi:        not found (no GPU driver on this machine)"
  fi
} >"$o" 2>&1
cat "$o"
gpu=$(command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader 2>/dev/null | head -1)
echo "GPU: ${gpu:-none found (nvidia-smi absent or failing)}; tools in results/preflight.txt" >"$RESULTS/summary-preflight.txt"
