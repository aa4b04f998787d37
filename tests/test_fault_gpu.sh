#!/usr/bin/env bash
# test_fault_gpu.sh - on a machine with a CUDA GPU and compute-sanitizer:
#  1. memcheck, racecheck and synccheck over every CUDA kernel of every
#     workload (the names `pairkit bench <workload> --list` gives), each on
#     a small problem through the command;
#  2. out of GPU memory: most of the card taken by another process
#     (PyTorch), then an image, a catalog and a trace that do not fit in
#     what is left; each must end in a clear error or a result, never a
#     crash; the image must be made in bands of rows, and memsort with
#     --backend auto must sort the trace on the CPU;
#  3. a card so full that no context can be made on it (PK_GPU_NOCTX_MIB
#     left, default 128): --backend auto must run each workload on the CPU,
#     saying why, with the CPU's result; --backend cuda must fail clearly;
#     `pairkit version` must say that device 0 cannot be used.
# Usage: tests/test_fault_gpu.sh PAIRKIT WORKDIR [SECONDS]; prints one line
# per run and a summary; exit 1 if any run failed. PK_GPU_KEEP_MIB: memory
# left free on the card (default 3072: room for a context, not for the
# inputs); PK_GPU_SKIP_SANITIZER=1 runs only the out-of-memory part;
# PK_LIB=path/to/libpairkit.so adds the Python module to part 3.
set -u
bin=$(readlink -f "$1")
lib=${PK_LIB:+$(readlink -f "$PK_LIB")}
work=$2
budget=${3:-200}
root=$(dirname "$(dirname "$(readlink -f "$0")")")
mkdir -p "$work"
cd "$work" || exit 1
start=$(date +%s)
left() { echo $((budget - ($(date +%s) - start))); }

# small inputs: 1500 objects of each bundled catalog, 2000 visibilities, a 2^16-entry trace
for f in data flat; do
  src=$(ls "$root"/data/galaxy/${f}_100k_arcmin.txt)
  { echo 1500; sed -n '2,1501p' "$src"; } > $f.txt
done
"$bin" bench dftimage --write-npz vis.npz --nvis 2000 > /dev/null 2>&1 || true
[ -f vis.npz ] || cp "$root"/data/vis/lesson_small.npz vis.npz
"$bin" memsort-gen trace --entries 65536 --chunk 16384 > /dev/null 2>&1

run() { # name, command...: one line of result; the exit code in rc_<name>
  local name=$1; shift
  local tag=${name// /_}
  local t0=$(date +%s.%N)
  timeout 120 "$@" > "log_$tag.txt" 2>&1
  local rc=$?
  echo $rc > "rc_$tag"
  local dt=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN {print b - a}')
  local summary=$(grep -E "ERROR SUMMARY|RACECHECK SUMMARY|pairkit [a-z-]*:" "log_$tag.txt" | tail -1)
  printf '%-48s rc %3d  %6.1f s  %s\n' "$name" "$rc" "$dt" "$summary"
}

cs="compute-sanitizer --error-exitcode 9 --print-limit 20"
jobs_file=$work/jobs.txt
: > "$jobs_file"
for k in $("$bin" bench angcorr --list 2>/dev/null | awk '$1 ~ /^cuda/ {print $1}'); do
  for tool in memcheck racecheck synccheck; do
    echo "angcorr $k $tool|$cs --tool $tool $bin angcorr data.txt flat.txt --backend cuda --kernel $k -q --png none -o o_${k}_$tool.out" >> "$jobs_file"
  done
done
for k in $("$bin" bench dftimage --list 2>/dev/null | awk '$1 ~ /^cuda/ {print $1}'); do
  for tool in memcheck racecheck synccheck; do
    echo "dftimage $k $tool|$cs --tool $tool $bin dftimage vis.npz --backend cuda --kernel $k --size 48 --cell 0.002 -q -o i_${k}_$tool.fits" >> "$jobs_file"
  done
done
for tool in memcheck racecheck synccheck; do
  echo "memsort cuda $tool|$cs --tool $tool $bin memsort trace --backend cuda --workers 3 --worker 1 --verify -q -o m_$tool" >> "$jobs_file"
done
echo "$(wc -l < "$jobs_file") sanitizer runs"
# six at a time: the runs are short and mostly host-bound under the tools
[ "${PK_GPU_SKIP_SANITIZER:-0}" = 1 ] && : > "$jobs_file"
while IFS='|' read -r name cmd; do
  [ "$(left)" -gt 60 ] || { echo "$name: not run (time)"; continue; }
  ( run "$name" $cmd ) &
  while [ "$(jobs -r | wc -l)" -ge 6 ]; do sleep 0.2; done
done < "$jobs_file"
wait
fails=0
for f in rc_angcorr_* rc_dftimage_* rc_memsort_*; do
  [ -f "$f" ] && [ "$(cat "$f")" != 0 ] && fails=$((fails + 1))
done

echo "== out of GPU memory"
if python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null; then
  hog_start() { # MiB to leave free; the hog's pid in $hog
    rm -f hog.ready
    PK_KEEP=$1 python3 - <<'EOF' &
import os, sys, time, torch
free, total = torch.cuda.mem_get_info()
keep = int(os.environ["PK_KEEP"]) << 20
hog = torch.empty(free - keep, dtype=torch.uint8, device='cuda')
print(f"hog: {(free - keep) / 2**30:.1f} GiB taken of {total / 2**30:.1f}, {keep >> 20} MiB left", flush=True)
open('hog.ready', 'w').close()
time.sleep(100)
EOF
    hog=$!
    for i in $(seq 100); do [ -f hog.ready ] && break; sleep 0.3; done
  }
  hog_start "${PK_GPU_KEEP_MIB:-3072}"
  "$bin" memsort-gen bigtrace --entries 2^28 > /dev/null 2>&1
  # the image (23.8 GiB in one pass) is made in bands of rows: it must succeed
  run "oom dftimage 40000 cuda" "$bin" dftimage vis.npz --backend cuda --size 40000 --cell 1e-6 --png none -o big.fits
  grep -q "bands of rows" log_oom_dftimage_40000_cuda.txt || { echo "dftimage 40000: not made in bands"; fails=$((fails + 1)); }
  [ "$(cat rc_oom_dftimage_40000_cuda)" = 0 ] || fails=$((fails + 1))
  rm -f big.fits
  run "oom dftimage too little for a band" "$bin" dftimage vis.npz --backend cuda --size 40000 --cell 1e-6 --gpu-memory 0.001 --png none -o small.fits
  grep -q "not enough GPU memory" log_oom_dftimage_too_little_for_a_band.txt || { echo "--gpu-memory 0.001: no clear error"; fails=$((fails + 1)); }
  [ "$(cat rc_oom_dftimage_too_little_for_a_band)" = 1 ] || fails=$((fails + 1))
  run "oom angcorr 100k cuda" "$bin" angcorr "$root"/data/galaxy/data_100k_arcmin.txt "$root"/data/galaxy/flat_100k_arcmin.txt --backend cuda -q --png none -o big.out
  run "oom memsort 2^28 cuda" "$bin" memsort bigtrace --backend cuda -q -o bigout
  # auto: the trace does not fit in the GPU's free memory, so the CPU sorts it
  run "oom memsort 2^28 auto" "$bin" memsort bigtrace -o autoout
  grep -q "sorted on the CPU" log_oom_memsort_2^28_auto.txt && [ -f autoout/memsort.bin ] \
    || { echo "memsort auto: not sorted on the CPU"; fails=$((fails + 1)); }
  [ "$(cat rc_oom_memsort_2^28_auto)" = 0 ] || fails=$((fails + 1))
  rm -rf autoout
  for f in rc_oom_*; do # 0 (it fitted) or an error exit; 124 (hung) or a signal is a failure
    rc=$(cat "$f")
    [ "$rc" -le 2 ] || fails=$((fails + 1))
  done
  kill $hog 2>/dev/null
  wait $hog 2>/dev/null
  ls small.fits big.out bigout 2>/dev/null | sed 's/^/left behind: /'

  echo "== no room for a context"
  "$bin" angcorr data.txt flat.txt --backend cpu -q --png none -o cpu.out
  "$bin" dftimage vis.npz --backend cpu --size 48 --cell 0.002 --png none -q -o cpu.fits
  "$bin" memsort trace --backend cpu -q -o cpu_ms
  hog_start "${PK_GPU_NOCTX_MIB:-128}"
  run "noctx angcorr auto" "$bin" angcorr data.txt flat.txt --png none -o auto.out
  run "noctx dftimage auto" "$bin" dftimage vis.npz --size 48 --cell 0.002 --png none -o auto.fits
  run "noctx memsort auto" "$bin" memsort trace -o auto_ms
  run "noctx angcorr cuda" "$bin" angcorr data.txt flat.txt --backend cuda -q --png none -o cuda.out
  run "noctx version" "$bin" version
  grep -q "CUDA device 0: cannot be used (" log_noctx_version.txt \
    || { echo "version with no room for a context: device 0 not said to be unusable"; fails=$((fails + 1)); }
  for w in angcorr dftimage memsort; do
    [ "$(cat rc_noctx_${w}_auto)" = 0 ] && grep -q "is present but cannot be used (.*): running on the CPU" \
      log_noctx_${w}_auto.txt || { echo "$w auto: not run on the CPU with a note"; fails=$((fails + 1)); }
  done
  cmp -s cpu.out auto.out && cmp -s cpu.fits auto.fits && cmp -s cpu_ms/memsort.bin auto_ms/memsort.bin \
    || { echo "auto on the CPU: a result differs from --backend cpu"; fails=$((fails + 1)); }
  [ "$(cat rc_noctx_angcorr_cuda)" = 1 ] && [ ! -e cuda.out ] && grep -q "CUDA device 0 cannot be used (" \
    log_noctx_angcorr_cuda.txt \
    || { echo "angcorr cuda with no room for a context: not a clear failure"; fails=$((fails + 1)); }
  if [ -n "$lib" ] && python3 -c 'import numpy' 2>/dev/null; then
    # the Python module: pinning is a no-op and auto sorts on the CPU, as cpu does
    PYTHONPATH=$root/python PAIRKIT_LIB=$lib python3 - > log_noctx_python.txt 2>&1 <<'EOF'
import numpy as np, pairkit
addr, starts = pairkit.memsort_generate(1 << 16, seed=3)
with pairkit.memsort_pin(addr):
    auto = pairkit.memsort(addr, chunk_start=starts, workers=3, worker=1)
cpu = pairkit.memsort(addr, chunk_start=starts, workers=3, worker=1, backend="cpu")
assert auto["kernel"] == cpu["kernel"], (auto["kernel"], cpu["kernel"])
assert all(np.array_equal(auto[k], cpu[k]) for k in ("runs", "values", "chunk_counts", "instances"))
print("python: pinned and sorted on the CPU, kernel", auto["kernel"])
EOF
    rc=$?
    printf '%-48s rc %3d  %s\n' "noctx python memsort_pin + auto" "$rc" "$(tail -1 log_noctx_python.txt)"
    [ $rc = 0 ] || fails=$((fails + 1))
  fi
  kill $hog 2>/dev/null
  wait $hog 2>/dev/null
else
  echo "no PyTorch with CUDA: out-of-memory runs skipped"
fi
echo "failed runs: $fails; $(($(date +%s) - start)) s"
[ $fails -eq 0 ]
