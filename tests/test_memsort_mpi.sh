#!/usr/bin/env bash
# mpirun -np K pairkit memsort, K = 1, 2, 3: rank w is worker w of K and
# writes OUT/worker-000w/, equal byte for byte to a one-process run of
# --workers K --worker w; rank 0 lists the workers. A rank that fails makes
# the job fail with its message, and no worker's output remains.
set -u
cli=${PAIRKIT_CLI:?}
mpirun=(mpirun --oversubscribe --allow-run-as-root)
dir=$(mktemp -d /tmp/pairkit_mpi_mem_XXXXXX)
trap 'rm -rf "$dir"' EXIT
fail=0 n=0
check() { n=$((n + 1)); if eval "$1"; then :; else echo "check failed: $2"; fail=$((fail + 1)); fi; }

"$cli" memsort-gen "$dir/trace" --entries 300000 --seed 7 --awkward > "$dir/gen.log" 2>&1
check "[ $? -eq 0 ]" "memsort-gen: $(cat "$dir/gen.log")"
for k in 1 2 3; do
  "${mpirun[@]}" -np $k "$cli" memsort "$dir/trace" -o "$dir/mpi$k" -q --backend cpu --threads 1 --verify \
    > "$dir/mpi$k.log" 2>&1
  check "[ $? -eq 0 ]" "np $k: $(cat "$dir/mpi$k.log")"
  for ((w = 0; w < k; w++)); do
    "$cli" memsort "$dir/trace" --workers $k --worker $w -o "$dir/one$k-$w" -q --backend cpu > /dev/null 2>&1
    wd=$(printf '%s/mpi%d/worker-%04d' "$dir" $k $w)
    if [ $k -eq 1 ]; then wd="$dir/mpi1"; fi
    check "cmp -s '$dir/one$k-$w/memsort.bin' '$wd/memsort.bin'" "np $k worker $w: memsort.bin differs"
    check "cmp -s '$dir/one$k-$w/summary.txt' '$wd/summary.txt'" "np $k worker $w: summary.txt differs"
  done
done
check "grep -q '3 workers' '$dir/mpi3/workers.txt'" "rank 0 lists the workers"

# Rank 1 reads a trace directory that is not there: the job fails, nothing remains.
cat > "$dir/one_bad.sh" <<EOS
#!/bin/sh
if [ "\$OMPI_COMM_WORLD_RANK" = 1 ]; then t="$dir/no-such-trace"; else t="$dir/trace"; fi
exec "$cli" memsort "\$t" -o "$dir/failed" -q --backend cpu --threads 1
EOS
chmod +x "$dir/one_bad.sh"
"${mpirun[@]}" -np 3 "$dir/one_bad.sh" > "$dir/bad.log" 2>&1
check "[ $? -ne 0 ]" "a failing rank must fail the job"
check "grep -q 'rank 1.*no-such-trace' '$dir/bad.log'" "the failing rank names the directory: $(cat "$dir/bad.log")"
check "[ -z \"\$(find '$dir/failed' -type f 2>/dev/null)\" ]" "no worker output after a failed rank"

echo "test_memsort_mpi: $((n - fail)) passed, $fail failed"
[ $fail -eq 0 ]
