#!/usr/bin/env bash
# The main job on a fresh Debian 12 machine: install what is missing, build,
# and compute w(theta) of the bundled catalogs into omega.out and omega.png
# (on a CUDA GPU when one is present, else on the CPU).
set -euo pipefail
cd "$(dirname "$0")"
bash scripts/deps.sh
echo "building in build/ (a few minutes the first time; the log in build.log)" >&2
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release > build.log 2>&1 || { cat build.log; exit 1; }
cmake --build build -j "$(nproc)" >> build.log 2>&1 || { tail -50 build.log; exit 1; }
build/pairkit angcorr data/galaxy/data_100k_arcmin.txt data/galaxy/flat_100k_arcmin.txt \
  -o omega.out --png omega.png "$@"
