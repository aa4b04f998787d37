#!/usr/bin/env bash
# The tests on a fresh Debian 12 machine: install what is missing, build with
# warnings as errors, run the default test set (ctest label slow excluded;
# tests that need a GPU skip without one), then the same under AddressSanitizer
# and UndefinedBehaviorSanitizer (slow, GPU and nosan tests left out there).
# `./test.sh --slow` adds the slow tests to the first run.
set -euo pipefail
cd "$(dirname "$0")"
bash scripts/deps.sh
jobs=$(nproc)
labels=(-LE slow)
[ "${1:-}" = "--slow" ] && labels=()

echo "== build (Release, -Werror)"
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DPK_WERROR=ON > build.log 2>&1 || { cat build.log; exit 1; }
cmake --build build -j "$jobs" >> build.log 2>&1 || { tail -80 build.log; exit 1; }
echo "== tests"
(cd build && ctest --output-on-failure -j "$jobs" "${labels[@]}")

echo "== build (ASan + UBSan)"
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPK_SANITIZE=ON -DPK_CUDA=OFF -DPK_WERROR=ON \
  > build-asan.log 2>&1 || { cat build-asan.log; exit 1; }
cmake --build build-asan -j "$jobs" >> build-asan.log 2>&1 || { tail -80 build-asan.log; exit 1; }
echo "== tests under sanitizers"
(cd build-asan && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
  LSAN_OPTIONS=suppressions="$PWD/../tests/lsan.supp" \
  ctest --output-on-failure -j "$jobs" -LE "slow|cuda|nosan")
