#!/usr/bin/env bash
# multigpu.sh - angcorr and dftimage on 1..G GPUs of one host: one process
# for G = 1, `mpirun -np G` for more (each rank on GPU rank % devices), the
# outputs compared with the one-GPU run, whole-job wall time and the device
# kernel time the command reports. Inputs, outputs and logs under $WORK;
# the table and the logs' tails under $OUT; the table printed last.
#   PK=path/to/pairkit bash bench/multigpu.sh
set -u
PK=${PK:-build/pairkit}
OUT=${OUT:-multigpu-out}
WORK=${WORK:-/tmp/pairkit-multigpu}
G=${G:-$(nvidia-smi -L | wc -l)}
mkdir -p "$OUT" "$WORK"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
MPIRUN=(mpirun --allow-run-as-root --oversubscribe --bind-to none -x LD_LIBRARY_PATH -x PATH)
[ -n "${OPAL_PREFIX:-}" ] && MPIRUN+=(-x OPAL_PREFIX)
now() { date +%s.%N; }
rows=()

# 1M x 1M synthetic catalogs: uniform over RA 0..90 deg, Dec 0..90 deg (sin uniform), arcmin.
awk 'function asin(x) { return atan2(x, sqrt(1 - x * x)) } BEGIN { srand(11); n = 1000000; print n;
  for (i = 0; i < n; i++) printf "%.6f %.6f\n", 5400 * rand(), asin(rand()) * 10800 / 3.141592653589793 }' > "$WORK/d1m.txt"
awk 'function asin(x) { return atan2(x, sqrt(1 - x * x)) } BEGIN { srand(12); n = 1000000; print n;
  for (i = 0; i < n; i++) printf "%.6f %.6f\n", 5400 * rand(), asin(rand()) * 10800 / 3.141592653589793 }' > "$WORK/r1m.txt"

angcorr() { # name data random g
    local name=$1 d=$2 r=$3 g=$4 t0 t1
    t0=$(now)
    if [ "$g" = 1 ]; then "$PK" angcorr "$d" "$r" --backend cuda -o "$WORK/$name-g1.out" --png none >"$WORK/$name-g1.log" 2>&1
    else "${MPIRUN[@]}" -np "$g" "$PK" angcorr "$d" "$r" --backend cuda -o "$WORK/$name-g$g.out" --png none >"$WORK/$name-g$g.log" 2>&1; fi
    local rc=$?
    t1=$(now)
    local dev same
    dev=$(grep -o 'device kernel time [0-9.]* ms' "$WORK/$name-g$g.log" | awk '{print $4}')
    same=$(cmp -s "$WORK/$name-g1.out" "$WORK/$name-g$g.out" && echo byte-identical || echo DIFFERENT)
    rows+=("angcorr $name | G=$g | rc=$rc | wall $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }') s | kernels ${dev:-?} ms | $same")
}

dft() { # g [--check]
    local g=$1 t0 t1
    t0=$(now)
    if [ "$g" = 1 ]; then "$PK" dftimage "$WORK/vis4m.npz" --size 2048 --backend cuda -o "$WORK/img-g1.fits" --png none ${2:-} >"$WORK/dft-g1.log" 2>&1
    else "${MPIRUN[@]}" -np "$g" "$PK" dftimage "$WORK/vis4m.npz" --size 2048 --backend cuda -o "$WORK/img-g$g.fits" --png none ${2:-} >"$WORK/dft-g$g.log" 2>&1; fi
    local rc=$?
    t1=$(now)
    local dev err
    dev=$(grep -o 'kernel [^:]*: [0-9.]* s of device time' "$WORK/dft-g$g.log" | awk '{print $3}')
    err=$(grep -o 'relative L2 error vs float64 reference: [0-9.e+-]*' "$WORK/dft-g$g.log" | awk '{print $NF}')
    rows+=("dftimage 4M vis x 2048^2 | G=$g | rc=$rc | wall $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }') s | kernels ${dev:-?} s | rel L2 vs float64 ${err:-?}")
}

nvidia-smi -L > "$WORK/smi.txt" 2>&1
g=1
while [ $g -le "$G" ]; do
    angcorr bundled data/galaxy/data_100k_arcmin.txt data/galaxy/flat_100k_arcmin.txt $g
    angcorr 1m "$WORK/d1m.txt" "$WORK/r1m.txt" $g
    g=$((g * 2))
done
"$PK" bench dftimage --nvis 4000000 --write-npz "$WORK/vis4m.npz" >"$WORK/gen.log" 2>&1
g=1
while [ $g -le "$G" ]; do dft $g; g=$((g * 2)); done
dft "$G" --check # the largest G once more, compared with the float64 reference on a pixel subset
cat "$WORK/smi.txt"
tail -n 25 "$WORK"/*.log > "$OUT/logs.txt" 2>&1
printf '%s\n' "${rows[@]}" | tee "$OUT/table.txt"
