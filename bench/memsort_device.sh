#!/bin/bash
# memsort on the GPU machine, in one call: every CUDA path against the
# reference on fresh seeds (awkward cases, both presets, W = 1, 3, 16, one
# chunk and 4096 chunks), compute-sanitizer memcheck on a small trace, and
# the 519M-entry benchmark beside the plain CUB alternative. QUICK=1 leaves
# out the 2^24-entry tests and the CLI runs. Expects the binaries
# (pairkit, test_memsort_cpu: a build with CUDA) in $BIN (default build),
# with any shared libraries the machine lacks beside them; logs go to $OUT.
set -u
BIN=${BIN:-build}
OUT=${OUT:-/tmp/memsort-out}
ENTRIES=${ENTRIES:-519000000}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$BIN${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
P=$BIN/pairkit
step() { echo "== $*"; }
step machine
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader
echo "cores $(nproc)"; date -u

step "tests: CUDA against the reference"
seed=$((10#$(date +%s%N | cut -c10-18) + 1)) # base 10 (a leading 0 is not octal), never 0
PAIRKIT_TEST_SEED=$seed timeout 200 $BIN/test_memsort_cpu cuda >"$OUT/test_cuda.log" 2>&1
echo "test_memsort_cuda seed $seed rc=$?: $(tail -1 "$OUT/test_cuda.log")"
grep "check failed" "$OUT/test_cuda.log" | head -5
if [ -z "${QUICK:-}" ]; then
  PAIRKIT_TEST_SEED=$((seed + 1)) timeout 300 $BIN/test_memsort_cpu cuda big >"$OUT/test_cuda_big.log" 2>&1
  echo "test_memsort_cuda_big rc=$?: $(tail -1 "$OUT/test_cuda_big.log")"
  grep "check failed" "$OUT/test_cuda_big.log" | head -5
fi

step "CLI: awkward traces under the default table, CUDA with --verify"
if [ -z "${QUICK:-}" ]; then {
  $P memsort-gen /tmp/awk46 --entries 12000000 --seed $seed --awkward
  $P memsort-gen /tmp/awk4096 --entries 12000000 --seed $((seed + 2)) --awkward --chunk 2930
  for d in /tmp/awk46 /tmp/awk4096; do
    for wk in "1 0" "3 1" "16 15" "16 0"; do
      set -- $wk
      timeout 120 $P memsort $d --workers $1 --worker $2 -o /tmp/out-$1-$2 --backend cuda --verify -q
      echo "$d W=$1 w=$2 rc=$?"
    done
  done
} >"$OUT/cli.log" 2>&1
  tail -12 "$OUT/cli.log"
fi

step "compute-sanitizer memcheck"
printf 'ROM 0x80000000 64K 64 2^12\nINPUT 0x90000000 64K 64 2^12\nRAM 0xA0000000 8M 512 2^14\n' >/tmp/small.regions
$P memsort-gen /tmp/small --entries 300000 --seed $seed --regions /tmp/small.regions --chunk 5000 >/dev/null 2>&1
timeout 240 compute-sanitizer --tool memcheck --leak-check no $P memsort /tmp/small --regions /tmp/small.regions \
  --backend cuda --workers 3 --worker 2 --verify -o /tmp/out-san -q >"$OUT/sanitizer.log" 2>&1
echo "memcheck rc=$?: $(grep -E 'ERROR SUMMARY' "$OUT/sanitizer.log")"

step "bench: $ENTRIES entries"
timeout 400 $P bench memsort --backend cuda --entries $ENTRIES --runs 7 2>&1 | tee "$OUT/bench_cuda.log"
echo "bench rc=${PIPESTATUS[0]}"

step "bench: $ENTRIES entries, zisk layout"
timeout 200 $P bench memsort --backend cuda --entries $ENTRIES --runs 5 --regions zisk 2>&1 | tee "$OUT/bench_cuda_zisk.log"
step "bench: CPU of this machine, $ENTRIES entries"
timeout 200 $P bench memsort --backend cpu --entries $ENTRIES --runs 3 --no-ref 2>&1 | tee "$OUT/bench_cpu.log"
