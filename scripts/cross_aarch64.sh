#!/usr/bin/env bash
# Build pairkit for 64-bit ARM Linux (warnings as errors) on a Debian 12
# x86-64 machine, then run the library's tests under qemu-user with one
# thread. Installs the cross compiler, qemu-user and the arm64 -dev
# packages (apt, as root). The command-line tests start build/pairkit
# themselves and need the kernel's binfmt_misc for qemu, which containers
# often lack; they are left out. Usage: scripts/cross_aarch64.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-aarch64}
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo
export DEBIAN_FRONTEND=noninteractive
if ! dpkg --print-foreign-architectures | grep -qx arm64; then $SUDO dpkg --add-architecture arm64; fi
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user \
  libcfitsio-dev:arm64 libzip-dev:arm64 zlib1g-dev:arm64 cmake pkg-config
cmake -S . -B "$build" -DCMAKE_TOOLCHAIN_FILE="$PWD/cmake/aarch64-linux-gnu.cmake" -DCMAKE_BUILD_TYPE=Release \
  -DPK_CUDA=OFF -DPK_WERROR=ON
cmake --build "$build" -j"$(nproc)"
# qemu-user 7.2 hangs in multithreaded OpenMP programs (a three-line one
# included), so one thread; the tests that spawn the command line are left out
cd "$build"
OMP_NUM_THREADS=1 ctest -R "test_angcorr_(ref|edges|random|bundled|corrfunc_rule)$|test_dftimage_(kernels|npz|uvfits|sky)$"
# memsort's kernel test takes far longer than its ctest limit under emulation
OMP_NUM_THREADS=1 /usr/bin/qemu-aarch64 -L /usr/aarch64-linux-gnu ./test_memsort_cpu | tail -n 1
