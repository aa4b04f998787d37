#!/usr/bin/env bash
# angcorr on the CPU: the kernel ladder under pairkit's bench protocol (cold
# run apart, interleaved warm rounds, median and min), then the whole command
# on the bundled catalogs (file reading and output included) with hyperfine
# (installed with apt-get, as scripts/deps.sh does, when missing).
# Usage: bench/angcorr_cpu.sh [build-dir]   (run on an otherwise idle machine)
# N_LADDER (default 30000) sizes the ladder; N_FULL (default: all 100,000)
# the interleaved run of the fastest kernels; RUNS the warm runs (3).
# Figures and what they mean: docs/performance.md, "angcorr".
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
pk=$build/pairkit
n_ladder=${N_LADDER:-30000}
n_full=${N_FULL:-}
runs=${RUNS:-3}
d=data/galaxy/data_100k_arcmin.txt
r=data/galaxy/flat_100k_arcmin.txt
echo "== $(date -u +%F) $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2) x $(nproc); load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "== ladder on $n_ladder x $n_ladder (every CPU kernel, $runs warm runs each)"
$pk bench angcorr --backend cpu --n "$n_ladder" --runs "$runs" \
  --kernels scalar,avx2-table,avx512-table,avx2,avx512,cpu-approx-acos
echo "== the full problem: the fastest kernels and the plain float32 anchor, interleaved"
$pk bench angcorr --backend cpu --runs "$runs" ${n_full:+--n "$n_full"} --kernels avx512,avx2,cpu-approx-acos
echo "== whole command, bundled catalogs"
if ! command -v hyperfine >/dev/null; then
  echo "installing hyperfine"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO=sudo
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends hyperfine ||
    { DEBIAN_FRONTEND=noninteractive $SUDO apt-get update -qq &&
      DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends hyperfine; }
fi
hyperfine --warmup 1 --runs 5 \
  "$pk angcorr $d $r -o /tmp/pairkit_bench_omega.out --png none -q --backend cpu"
