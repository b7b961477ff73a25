#!/usr/bin/env bash
# Installs what hbmscope needs on Debian 12, only what is missing (a second run
# installs nothing). The CUDA toolkit is optional and not installed here.
set -euo pipefail
# clang and its runtimes (libclang-rt-14-dev: ASan, UBSan, libFuzzer) build the
# sanitizer suite and the fuzzers that ctest runs (tests/sanitize.cmake).
pkgs=(cmake g++ make libcli11-dev libfmt-dev nlohmann-json3-dev catch2 gnuplot-nox python3 tmux clang libclang-rt-14-dev)
# Slurm and munge for the `cluster` test (tests/cluster_test.sh starts a
# one-node cluster of its own; no service is configured or started): 8
# packages, about 13 MB, without their recommends (mailutils, a MTA...).
slurm_pkgs=(slurmctld slurmd slurm-client munge)
missing_of() {
  local p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || echo "$p"
  done
}
missing=($(missing_of "${pkgs[@]}"))
# python3 may come from elsewhere (pyenv); a working one on the PATH will do.
if command -v python3 >/dev/null 2>&1; then
  missing=($(printf '%s\n' "${missing[@]}" | grep -vx python3 || true))
fi
slurm_missing=($(missing_of "${slurm_pkgs[@]}"))
if ((${#missing[@]} + ${#slurm_missing[@]})); then
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo=sudo
  echo "install-deps: installing ${missing[*]} ${slurm_missing[*]}" >&2
  $sudo apt-get update -qq
  if ((${#missing[@]})); then
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
  if ((${#slurm_missing[@]})); then
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${slurm_missing[@]}" >/dev/null
  fi
fi
