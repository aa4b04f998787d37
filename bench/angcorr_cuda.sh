#!/bin/bash
# angcorr_cuda.sh - the device plan for angcorr on CUDA, one call: exactness
# of every CUDA kernel (random catalogs and the bundled ones), the
# sanitizers on a small problem, the kernel ladder, and whole-process wall
# times. Logs go under $OUT (or ./angcorr-cuda-out); the summary last.
#
#   bash bench/angcorr_cuda.sh [BUILD_DIR] [STEPS]
#
# BUILD_DIR (a build with CUDA: cmake -DPK_CUDA=ON) defaults to build;
# STEPS is a comma list of
# smi,tests,bundled,sanitize,ladder,naive,wall,sass (default: all). LADDER
# overrides the kernels of the ladder step. Shared libraries the device
# lacks may be put in .devlibs-acu/ (LD_LIBRARY_PATH).
set -u -o pipefail
BUILD=${1:-build}
STEPS=${2:-smi,tests,bundled,sanitize,ladder,naive,wall,sass}
LADDER=${LADDER:-cuda-chord,cuda-approx-acos,cuda-chord-offset,cuda-chord-rows4,cuda-chord-sorted,cuda-dot,cuda-dot-packed,cuda-dot-packed-rows8,cuda-dot-hi,cuda-dot-queue,cuda-dot-queue-cells8,cuda-dot-hi-queue-cells8,cuda-dot-queue-cells8-rows8,cuda-dot-hi-queue-cells8-hilbert,cuda-dot-hi-queue-cells8-hilbert-fit4,cuda-dot-hi-queue-cells8-hilbert-fit4-direct}
FINAL=${FINAL:-cuda-dot-hi-queue-cells8-hilbert-fit4-direct}
OUT=${OUT:-angcorr-cuda-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/.devlibs-acu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
PK=$BUILD/pairkit
DATA=data/galaxy/data_100k_arcmin.txt
RAND=data/galaxy/flat_100k_arcmin.txt
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
has() { [[ ",$STEPS," == *",$1,"* ]]; }
summary=()

if has smi; then
    { date -u; nvidia-smi; nvidia-smi -q -d CLOCK; nproc; lscpu | head -20; } >"$OUT/smi.txt" 2>&1
    summary+=("card: $(nvidia-smi --query-gpu=name,clocks.max.sm,driver_version --format=csv,noheader 2>&1)")
fi

if has tests; then
    "$BUILD/test_angcorr_cuda" >"$OUT/tests.log" 2>&1
    summary+=("random catalogs: rc=$? $(tail -1 "$OUT/tests.log")")
fi

if has bundled; then
    "$BUILD/test_angcorr_cuda" bundled >"$OUT/bundled.log" 2>&1
    summary+=("bundled exactness: rc=$? $(tail -1 "$OUT/bundled.log")")
fi

if has sanitize; then
    : >"$OUT/sanitizer.log"
    kernels=$("$PK" bench angcorr --list | awk '/^cuda-/ {printf "%s%s", sep, $1; sep=","}')
    for tool in memcheck racecheck synccheck; do
        "$SAN" --tool $tool --error-exitcode 3 "$PK" bench angcorr --backend cuda --n 1500 --runs 1 \
            --kernels "$kernels" >>"$OUT/sanitizer.log" 2>&1
        rc=$?
        summary+=("compute-sanitizer $tool (1500 x 1500, every CUDA kernel): rc=$rc $(grep -E 'ERROR SUMMARY' "$OUT/sanitizer.log" | tail -1)")
    done
fi

: >"$OUT/ladder.log" # this run's ladder only
if has ladder; then
    echo "== the kernels, interleaved" >>"$OUT/ladder.log"
    "$PK" bench angcorr --backend cuda --runs 9 --kernels "$LADDER" >>"$OUT/ladder.log" 2>&1
    summary+=("ladder: see ladder.log")
fi

if has naive; then
    echo "== the naive kernel against the best one" >>"$OUT/ladder.log"
    "$PK" bench angcorr --backend cuda --runs 2 --kernels "cuda-naive,$FINAL" >>"$OUT/ladder.log" 2>&1
fi

if has wall; then
    {
        for backend in cuda cuda cuda cpu; do
            s=$(date +%s.%N)
            "$PK" angcorr "$DATA" "$RAND" --backend $backend -q -o /tmp/omega_$backend.out --png none
            rc=$?
            e=$(date +%s.%N)
            echo "wall $backend: $(awk "BEGIN{printf \"%.3f\", $e - $s}") s rc=$rc"
        done
        cmp /tmp/omega_cuda.out /tmp/omega_cpu.out && echo "omega.out: cuda and cpu identical"
    } >"$OUT/wall.log" 2>&1
    summary+=("$(tr '\n' ';' <"$OUT/wall.log")")
fi

if has sass; then
    cuobjdump --dump-sass "$PK" >"$OUT/sass.txt" 2>&1 || cuobjdump -sass "$BUILD/libpairkit.a" >"$OUT/sass.txt" 2>&1
fi

echo "==== summary"
printf '%s\n' "${summary[@]}"
[ -f "$OUT/bundled.log" ] && cat "$OUT/bundled.log"
[ -f "$OUT/ladder.log" ] && cat "$OUT/ladder.log"
