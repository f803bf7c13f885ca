#!/usr/bin/env bash
# Installs what stepsim needs on Debian 12, only what is missing (apt-get, as root or via sudo).
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config python3
  libboost-json1.81-dev libboost-program-options1.81-dev
  libfmt-dev libspdlog-dev catch2 libbenchmark-dev zlib1g-dev
  # the asan preset and tools/fuzz.sh: clang (`clang++` itself comes with the package clang)
  # with libFuzzer and the sanitizer runtimes, llvm-symbolizer for stacks
  clang clang-14 libclang-rt-14-dev llvm-14
  # the Slurm job-array test (a one-node Slurm) and tools/plot.py
  slurm-wlm munge python3-matplotlib
  # the Python module (pybind11, for Debian's python3) and its tests' DataFrames
  python3-dev pybind11-dev python3-pybind11 python3-pandas
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup-debian: all packages present"
  exit 0
fi

sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
echo "setup-debian: installing ${missing[*]}"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
