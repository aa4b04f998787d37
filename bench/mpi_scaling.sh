#!/usr/bin/env bash
# mpi_scaling.sh - the three workloads on K = 1, 2, 4, ... CPU ranks of one
# machine, one thread per rank (K = 1: one process, no mpirun): whole-job
# wall time, speed-up and efficiency against K = 1, and rank 0's time inside
# MPI collectives (reductions plus waiting for the slowest rank).
#   PK=path/to/pairkit KS="1 2 4 8 16" bash bench/mpi_scaling.sh
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
PK=$(realpath -m "${PK:-$root/build/pairkit}") # PK given: relative to the caller's folder
[ -x "$PK" ] || { echo "mpi_scaling.sh: no pairkit at $PK (set PK=path/to/pairkit)"; exit 2; }
KS=${KS:-1 2}
OUT=$(realpath -m "${OUT:-/tmp/pairkit-mpi-scaling-out}")
cd "$root" # the bundled catalogs are read from the repository's root
WORK=${WORK:-/tmp/pairkit-mpi-scaling}
N_CAT=${N_CAT:-40000}     # objects per catalog (angcorr)
N_VIS=${N_VIS:-16384}     # visibilities (dftimage, 512 x 512 pixels)
N_TRACE=${N_TRACE:-16777216} # trace entries (memsort)
mkdir -p "$OUT" "$WORK"
MPIRUN=(mpirun --allow-run-as-root --oversubscribe --bind-to core -x LD_LIBRARY_PATH -x PATH)
[ -n "${OPAL_PREFIX:-}" ] && MPIRUN+=(-x OPAL_PREFIX)
now() { date +%s.%N; }

head -$((N_CAT + 1)) data/galaxy/data_100k_arcmin.txt | sed "1s/.*/$N_CAT/" > "$WORK/d.txt"
head -$((N_CAT + 1)) data/galaxy/flat_100k_arcmin.txt | sed "1s/.*/$N_CAT/" > "$WORK/r.txt"
"$PK" bench dftimage --nvis "$N_VIS" --write-npz "$WORK/vis.npz" > "$WORK/gen.log" 2>&1
"$PK" memsort-gen "$WORK/trace" --entries "$N_TRACE" --seed 3 >> "$WORK/gen.log" 2>&1

declare -A base
run() { # workload k command...
    local w=$1 k=$2; shift 2
    local t0 t1 comm
    t0=$(now)
    if [ "$k" = 1 ]; then "$@" > "$WORK/$w-$k.log" 2>&1; else "${MPIRUN[@]}" -np "$k" "$@" > "$WORK/$w-$k.log" 2>&1; fi
    local rc=$?
    t1=$(now)
    comm=$(grep -o '[0-9.]* s of rank 0 in MPI collectives\|rank 0 of [0-9]*: [0-9.]* s in MPI' "$WORK/$w-$k.log" | grep -o '[0-9]*\.[0-9]*' | head -1)
    local wall
    wall=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')
    [ "$k" = 1 ] && base[$w]=$wall
    awk -v w="$w" -v k="$k" -v rc="$rc" -v t="$wall" -v b="${base[$w]}" -v c="${comm:-0}" 'BEGIN {
        printf "%-9s K=%-3d rc=%d  wall %8.3f s  speed-up %6.2f  efficiency %5.1f%%  collectives %.3f s (%.1f%%)\n",
               w, k, rc, t, b / t, 100 * b / t / k, c, 100 * c / t }'
}

{
echo "$(date -u +%F) $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2) x $(nproc)"
for k in $KS; do
    run angcorr "$k" "$PK" angcorr "$WORK/d.txt" "$WORK/r.txt" -o "$WORK/omega-$k.out" --png none --backend cpu --threads 1
done
for k in $KS; do
    run dftimage "$k" "$PK" dftimage "$WORK/vis.npz" --size 512 -o "$WORK/img-$k.fits" --png none --backend cpu --threads 1
done
for k in $KS; do
    run memsort "$k" "$PK" memsort "$WORK/trace" -o "$WORK/mem-$k" --backend cpu --threads 1
done
for k in $KS; do [ "$k" = 1 ] || cmp -s "$WORK/omega-1.out" "$WORK/omega-$k.out" || echo "angcorr K=$k: omega.out DIFFERS"; done
} | tee "$OUT/scaling.txt"
