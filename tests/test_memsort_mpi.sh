#!/usr/bin/env bash
# mpirun -np K pairkit memsort, K = 1, 2, 3: rank w is worker w of K and
# writes OUT/worker-000w/, equal byte for byte to a one-process run of
# --workers K --worker w; rank 0 lists the workers. A rank that fails makes
# the job fail with its message, and no output changes.
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

# written again, the files keep the modes they were given (the worker
# folders are swapped whole, so the modes are carried over from the old ones)
chmod 600 "$dir/mpi2/worker-0001/memsort.bin" "$dir/mpi2/workers.txt"
"${mpirun[@]}" -np 2 "$cli" memsort "$dir/trace" -o "$dir/mpi2" -q --backend cpu --threads 1 > "$dir/again.log" 2>&1
check "[ \"\$(stat -c %a '$dir/mpi2/worker-0001/memsort.bin' '$dir/mpi2/workers.txt' | tr '\n' ' ')\" = '600 600 ' ]" \
  "modes after writing again: $(stat -c '%a %n' "$dir/mpi2/worker-0001/memsort.bin" "$dir/mpi2/workers.txt" | tr '\n' ' ')"

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

# --workers under mpirun: every rank refuses it alike, at once (a rank-dependent
# check once left the other rank waiting forever).
timeout 60 "${mpirun[@]}" -np 2 "$cli" memsort "$dir/trace" -o "$dir/w" --workers 2 --worker 1 -q \
  > "$dir/workers.log" 2>&1
rc=$?
check "[ $rc -ne 0 ] && [ $rc -ne 124 ]" "--workers under mpirun: exit $rc (124: it hung)"
check "[ \$(grep -c 'leave out --workers' '$dir/workers.log') -eq 1 ]" "one message, from rank 0: $(cat "$dir/workers.log")"

# A job that fails at writing (rank 1's staging name taken by a file) leaves
# the older output of every rank as it was.
"$cli" memsort-gen "$dir/trace2" --entries 300000 --seed 8 -q > /dev/null 2>&1
md5sum "$dir"/mpi3/worker-000*/* "$dir/mpi3/workers.txt" > "$dir/sums"
touch "$dir/mpi3/worker-0001.pkstage"
"${mpirun[@]}" -np 3 "$cli" memsort "$dir/trace2" -o "$dir/mpi3" -q --backend cpu --threads 1 > "$dir/stage.log" 2>&1
check "[ $? -ne 0 ]" "a rank that cannot write must fail the job"
check "md5sum -c --quiet '$dir/sums' > /dev/null 2>&1" "the older output changed: $(md5sum -c "$dir/sums" 2>&1 | grep -v OK)"
check "[ -z \"\$(find '$dir/mpi3' -name '*.pkold*' -o -name '*.pkstage' -type d)\" ]" "staged or older folders left"
rm -f "$dir/mpi3/worker-0001.pkstage"
"${mpirun[@]}" -np 3 "$cli" memsort "$dir/trace2" -o "$dir/mpi3" -q --backend cpu --threads 1 > "$dir/again.log" 2>&1
check "[ $? -eq 0 ] && ! cmp -s '$dir/one3-0/memsort.bin' '$dir/mpi3/worker-0000/memsort.bin'" \
  "the next job replaces the output: $(cat "$dir/again.log")"

# A job of fewer ranks into the same folder: the larger job's extra folder goes.
"${mpirun[@]}" -np 2 "$cli" memsort "$dir/trace2" -o "$dir/mpi3" -q --backend cpu --threads 1 > "$dir/fewer.log" 2>&1
check "[ $? -eq 0 ] && [ ! -e '$dir/mpi3/worker-0002' ] && grep -q '2 workers' '$dir/mpi3/workers.txt'" \
  "a job of 2 ranks after one of 3: $(ls "$dir/mpi3")"

# Rank 1 reads another trace under the same name (a stale copy on one
# node): the ranks compare what they read, the job fails, nothing written.
cat > "$dir/other_trace.sh" <<EOS
#!/bin/sh
t="$dir/trace2"
if [ "\$OMPI_COMM_WORLD_RANK" = 1 ]; then t="$dir/trace"; fi
exec "$cli" memsort "\$t" -o "$dir/copies" -q --backend cpu --threads 1
EOS
chmod +x "$dir/other_trace.sh"
timeout 120 "${mpirun[@]}" -np 2 "$dir/other_trace.sh" > "$dir/copies.log" 2>&1
rc=$?
check "[ $rc -eq 1 ] && [ \$(grep -c 'the ranks read different traces' '$dir/copies.log') -eq 1 ] && [ ! -e '$dir/copies' ]" \
  "ranks reading different traces: exit $rc, $(cat "$dir/copies.log")"

# Rank 1 finds no place for the output (on its node the folder's parent is
# missing) while rank 0 does: every rank stops before the work, nothing is
# written (rank 1 once returned alone and left rank 0 waiting forever).
cat > "$dir/one_place.sh" <<EOS
#!/bin/sh
if [ "\$OMPI_COMM_WORLD_RANK" = 1 ]; then o="$dir/no-such-parent/out"; else o="$dir/placed"; fi
exec "$cli" memsort "$dir/trace" -o "\$o" -q --backend cpu --threads 1
EOS
chmod +x "$dir/one_place.sh"
timeout 120 "${mpirun[@]}" -np 2 "$dir/one_place.sh" > "$dir/place.log" 2>&1
rc=$?
check "[ $rc -ne 0 ] && [ $rc -ne 124 ]" "one rank without a place for the output: exit $rc (124: it hung), $(cat "$dir/place.log")"
check "[ ! -e '$dir/placed' ] && [ ! -e '$dir/no-such-parent' ]" "no output after one rank had no place for it"
check "grep -q 'placed: another rank cannot write there' '$dir/place.log'" "rank 0 says why: $(cat "$dir/place.log")"

echo "test_memsort_mpi: $((n - fail)) passed, $fail failed"
[ $fail -eq 0 ]
