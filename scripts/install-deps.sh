#!/usr/bin/env bash
# Installs what hbmscope needs on Debian 12, only what is missing (a second run
# installs nothing). The CUDA toolkit is optional and not installed here.
set -euo pipefail
# clang and its runtimes (libclang-rt-14-dev: ASan, UBSan, libFuzzer) build the
# sanitizer suite and the fuzzers that ctest runs (tests/sanitize.cmake).
pkgs=(cmake g++ make libcli11-dev libfmt-dev nlohmann-json3-dev catch2 gnuplot-nox python3 tmux clang libclang-rt-14-dev)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# python3 may come from elsewhere (pyenv); a working one on the PATH will do.
if command -v python3 >/dev/null 2>&1; then
  missing=("${missing[@]/python3}")
fi
missing=($(printf '%s\n' "${missing[@]}" | grep -v '^$' || true))
if ((${#missing[@]})); then
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo=sudo
  echo "install-deps: installing ${missing[*]}" >&2
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi
