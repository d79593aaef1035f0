#!/usr/bin/env bash
# Installs the Debian packages openaclnn needs, when any is missing.
#   install-deps.sh build   what building the library and running the examples needs
#   install-deps.sh test    that, plus what the test suite, the benchmarks and the fuzzer need
#   install-deps.sh arm64   the cross build for 64-bit Arm and user-mode QEMU to run its tests (make test-arm64): the
#                           cross compiler, and the arm64 -dev packages through Debian's multiarch
set -euo pipefail
what=${1:-test}
packages=(g++ make cmake pkg-config libhwy-dev)
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
if [ "$what" = "arm64" ]; then
    packages+=(crossbuild-essential-arm64 libc6-dev-arm64-cross libgomp1-arm64-cross qemu-user libhwy-dev:arm64
               libgtest-dev:arm64)
    # (The apt-get update below, which runs whenever a package is missing, then reads arm64's package lists.)
    dpkg --print-foreign-architectures | grep -qx arm64 || $SUDO dpkg --add-architecture arm64
fi
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
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update
$SUDO apt-get install -y --no-install-recommends "${missing[@]}"
