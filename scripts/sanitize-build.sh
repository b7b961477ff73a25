#!/usr/bin/env bash
# Configures and builds the sanitizer tree: the CPU code (no CUDA) compiled by
# clang with AddressSanitizer + UndefinedBehaviorSanitizer (any report aborts),
# and libFuzzer's coverage hooks, so that the same tree holds the test programs,
# hbmscope, and the fuzzers of tests/fuzz/. The CTest entry `sanitize_build`
# runs this; the entries `sanitize_unit*`, `sanitize_cli*` and `fuzz_*` run what
# it builds.
#
#   scripts/sanitize-build.sh [BUILD_DIR]      (default: build/sanitize)
#
# Environment: CXX_SANITIZE (the clang++ to use), JOBS (default 2),
# CMAKE_CXX_COMPILER_LAUNCHER (e.g. ccache).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:-$root/build/sanitize}
cxx=${CXX_SANITIZE:-}
if [ -z "$cxx" ]; then
  for c in clang++ clang++-14 clang++-15 clang++-16; do
    if command -v "$c" >/dev/null 2>&1; then cxx=$(command -v "$c"); break; fi
  done
fi
if [ -z "$cxx" ]; then
  echo "sanitize-build: clang++ not found (scripts/install-deps.sh installs clang and libclang-rt-14-dev)" >&2
  exit 1
fi
flags="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer -fsanitize=fuzzer-no-link"
launcher=()
[ -n "${CMAKE_CXX_COMPILER_LAUNCHER:-}" ] && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER="$CMAKE_CXX_COMPILER_LAUNCHER")
# -O1 keeps stacks readable and compiles fast; assertions stay on (no NDEBUG),
# so that the JSON library's own checks run too.
cmake -S "$root" -B "$dir" -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_BUILD_TYPE=Sanitize \
  -DCMAKE_CXX_FLAGS_SANITIZE="-O1 -gline-tables-only $flags" \
  -DCMAKE_EXE_LINKER_FLAGS_SANITIZE="-fsanitize=address,undefined" \
  -DHBMSCOPE_CUDA=OFF -DHBMSCOPE_BENCH=OFF -DHBMSCOPE_FUZZ=ON -DHBMSCOPE_SANITIZER_SUITE=OFF \
  "${launcher[@]}" >"$dir.configure.log" 2>&1 || { cat "$dir.configure.log" >&2; exit 1; }
cmake --build "$dir" -j"${JOBS:-2}"
