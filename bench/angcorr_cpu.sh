#!/usr/bin/env bash
# angcorr on the CPU: the kernel ladder under pairkit's bench protocol (cold
# run apart, interleaved warm rounds, median and min), then the whole command
# on the bundled catalogs (file reading and output included) with hyperfine.
# Usage: bench/angcorr_cpu.sh [build-dir]   (run on an otherwise idle machine)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
pk=$build/pairkit
d=data/galaxy/data_100k_arcmin.txt
r=data/galaxy/flat_100k_arcmin.txt
echo "== $(date -u +%F) $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2) x $(nproc); load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "== ladder on 30,000 x 30,000 (every CPU kernel, 3 warm runs each)"
$pk bench angcorr --backend cpu --n 30000 --runs 3 \
  --kernels scalar,avx2-table,avx512-table,avx2,avx512,cpu-approx-acos
echo "== the full problem: the fastest kernels and the plain float32 anchor, interleaved"
$pk bench angcorr --backend cpu --runs 3 --kernels avx512,avx2,cpu-approx-acos
echo "== whole command, bundled catalogs"
hyperfine --warmup 1 --runs 5 \
  "$pk angcorr $d $r -o /tmp/pairkit_bench_omega.out --png none -q --backend cpu"
