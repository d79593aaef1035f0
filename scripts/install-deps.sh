#!/usr/bin/env bash
# Installs the Debian packages openaclnn needs, when any is missing.
#   install-deps.sh build   what building the library and running the examples needs
#   install-deps.sh test    that, plus what the test suite, the benchmarks and the fuzzer need
set -euo pipefail
what=${1:-test}
packages=(g++ make cmake pkg-config libhwy-dev)
if [ "$what" = "test" ]; then
    packages+=(libgtest-dev libgmock-dev libbenchmark-dev libomp-dev python3 python3-numpy python3-torch
               clang libclang-rt-14-dev)
fi
missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
    exit 0
fi
echo "installing: ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update
$SUDO apt-get install -y --no-install-recommends "${missing[@]}"
