#!/bin/bash
# dftimage on a CUDA machine, in one go: every CUDA kernel against the
# float64 reference (random and real data), compute-sanitizer memcheck on a
# small problem for every kernel, the ladder of `pairkit bench dftimage` on
# the benchmark problem (1M visibilities, 700 x 700, cell 0.0005), real and
# complex images, and an interleaved A/B of the two fastest kernels. Run
# from the repository root. BIN holds pairkit and test_dftimage_cuda;
# logs go to $OUT (or /tmp/dftimage_out). QUICK=1 skips the sanitizer and
# cuts the complex ladder to cuda-usual-f32 and cuda-hybrid-f32.
#   BIN=build bench/dftimage_device.sh
set -u
BIN=${BIN:-build}
O=${OUT:-/tmp/dftimage_out}
mkdir -p "$O"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-$(nproc)}
COMPLEX_KERNELS=cuda-usual-f32,cuda-tile-f32,cuda-final-f32,cuda-hybrid-f32
[ -n "${QUICK:-}" ] && COMPLEX_KERNELS=cuda-usual-f32,cuda-hybrid-f32
{
    date -u
    nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv
    "$BIN/pairkit" version
    echo "== test_dftimage_cuda"
    "$BIN/test_dftimage_cuda"
    echo "rc=$?"
    echo "== compute-sanitizer memcheck, every kernel, real and complex"
    for mode in $([ -z "${QUICK:-}" ] && echo real imag); do
        [ "$mode" = real ] && mode=""
        [ "$mode" = imag ] && mode="--imag"
        compute-sanitizer --tool memcheck --error-exitcode 3 "$BIN/pairkit" bench dftimage --backend cuda \
            --nvis 3001 --size 45 --runs 1 --check-pixels 64 $mode 2>&1 | tail -n 14
        echo "memcheck $mode rc=${PIPESTATUS[0]}"
    done
    echo "== ladder, real image (what the CLI writes)"
    "$BIN/pairkit" bench dftimage --backend cuda --runs 5 --check-pixels 1024
    echo "== ladder, complex image (--imag)"
    "$BIN/pairkit" bench dftimage --backend cuda --imag --runs 5 --check-pixels 1024 \
        --kernels "$COMPLEX_KERNELS"
    echo "== A/B interleaved: final vs hybrid, real"
    "$BIN/pairkit" bench dftimage --backend cuda --runs 9 --check-pixels 256 --kernels cuda-final-f32,cuda-hybrid-f32
    echo "== real data through the CLI, --check"
    for f in data/vis/mojave.uvfits data/vis/SR1_M87_2017_101_lo_hops_netcal_StokesI.uvfits; do
        "$BIN/pairkit" dftimage "$f" -o /tmp/d.fits --size 512 --cell 2e-10 --backend cuda --check
    done
    "$BIN/pairkit" dftimage data/vis/1133866760.uvfits --weights abs -o /tmp/d.fits --backend cuda --check
    "$BIN/pairkit" dftimage data/vis/1133866760.uvfits --weights abs -o /tmp/d.fits --backend cuda --precision double --check
    nvidia-smi --query-gpu=clocks.sm,temperature.gpu,power.draw --format=csv
    date -u
} > "$O/dftimage_device.log" 2>&1
if command -v cuobjdump > /dev/null; then
    for k in _Z8tile_f32ILb0ELi8ELi0EEv9tile_args _Z8tile_f32ILb0ELi8ELi1EEv9tile_args; do
        echo "== $k"
        cuobjdump -sass -fun "$k" "$BIN/pairkit"
    done > "$O/dftimage_sass.txt" 2>&1
fi
tail -n 60 "$O/dftimage_device.log"
