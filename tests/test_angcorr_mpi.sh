#!/usr/bin/env bash
# mpirun -np K pairkit angcorr, K = 1, 2, 3: byte-identical to one process;
# a rank that fails makes the job fail with its message and no output.
set -u
cli=${PAIRKIT_CLI:?}
mpirun=(mpirun --oversubscribe --allow-run-as-root)
dir=$(mktemp -d /tmp/pairkit_mpi_XXXXXX)
trap 'rm -rf "$dir"' EXIT
fail=0
check() { if eval "$1"; then :; else echo "check failed: $2"; fail=$((fail + 1)); fi; }

head -4001 data/galaxy/data_100k_arcmin.txt | sed '1s/.*/4000/' > "$dir/d.txt"
head -5001 data/galaxy/flat_100k_arcmin.txt | sed '1s/.*/5000/' > "$dir/r.txt"
"$cli" angcorr "$dir/d.txt" "$dir/r.txt" -o "$dir/one.out" --csv "$dir/one.csv" --png none -q --backend cpu
for k in 1 2 3; do
  "${mpirun[@]}" -np $k "$cli" angcorr "$dir/d.txt" "$dir/r.txt" -o "$dir/k$k.out" --csv "$dir/k$k.csv" \
    --png none -q --backend cpu --threads 1 > "$dir/k$k.log" 2>&1
  check "[ $? -eq 0 ]" "np $k exit status: $(cat "$dir/k$k.log")"
  check "cmp -s '$dir/one.out' '$dir/k$k.out'" "np $k: omega.out differs from one process"
  check "cmp -s '$dir/one.csv' '$dir/k$k.csv'" "np $k: CSV differs from one process"
done
# Log bins over a narrow range: most pairs out of range, parts still add up.
"$cli" angcorr "$dir/d.txt" "$dir/r.txt" -o "$dir/log1.out" --png none -q --theta-min 0.01 --log 10 --nbins 20
"${mpirun[@]}" -np 3 "$cli" angcorr "$dir/d.txt" "$dir/r.txt" -o "$dir/log3.out" --png none -q --theta-min 0.01 \
  --log 10 --nbins 20 --threads 1
check "cmp -s '$dir/log1.out' '$dir/log3.out'" "np 3 with log bins differs"

# RR kept by a 3-rank job and used again by a 2-rank job: the file and the
# outputs as one process gives them.
"$cli" angcorr "$dir/d.txt" "$dir/r.txt" -o "$dir/rr1.out" --png none -q --save-rr "$dir/rr1.txt"
"${mpirun[@]}" -np 3 "$cli" angcorr "$dir/d.txt" "$dir/r.txt" -o "$dir/rr3.out" --png none -q --threads 1 \
  --save-rr "$dir/rr3.txt"
check "cmp -s '$dir/rr1.txt' '$dir/rr3.txt' && cmp -s '$dir/one.out' '$dir/rr3.out'" "np 3 --save-rr differs"
"${mpirun[@]}" -np 2 "$cli" angcorr "$dir/d.txt" "$dir/r.txt" -o "$dir/rr2.out" --png none -q --threads 1 \
  --rr "$dir/rr3.txt" > "$dir/rr2.log" 2>&1
check "cmp -s '$dir/one.out' '$dir/rr2.out'" "np 2 --rr differs: $(cat "$dir/rr2.log")"

# Rank 1 is given a broken catalog: the job fails, rank 1 says why, nothing is written.
printf '3\n60 60\n61 abc\n62 61\n' > "$dir/bad.txt"
cat > "$dir/one_bad.sh" <<EOS
#!/bin/sh
if [ "\$OMPI_COMM_WORLD_RANK" = 1 ]; then d="$dir/bad.txt"; else d="$dir/d.txt"; fi
exec "$cli" angcorr "\$d" "$dir/r.txt" -o "$dir/failed.out" --png none -q --threads 1
EOS
chmod +x "$dir/one_bad.sh"
"${mpirun[@]}" -np 3 "$dir/one_bad.sh" > "$dir/bad.log" 2>&1
rc=$?
check "[ $rc -ne 0 ]" "a failing rank must fail the job (exit $rc)"
check "grep -q 'rank 1.*bad.txt:3' '$dir/bad.log'" "the failing rank names file and line: $(cat "$dir/bad.log")"
check "[ ! -e '$dir/failed.out' ]" "no output after a failed rank"
check "[ -z \"\$(ls '$dir' | grep tmp)\" ]" "no temporary files left"

# An output name that clashes with the default plot, or names an input:
# every rank stops before the count (a rank waiting on the others hung
# there once), exit 2, one message.
for args in "--csv $dir/clash.png" "--png $dir/d.txt"; do
  timeout 120 "${mpirun[@]}" -np 2 "$cli" angcorr "$dir/d.txt" "$dir/r.txt" -o "$dir/clash.out" $args \
    --threads 1 > "$dir/clash.log" 2>&1
  rc=$?
  check "[ $rc -ne 0 ] && [ $rc -ne 124 ] && [ \$(grep -c 'pairkit angcorr:' '$dir/clash.log') -eq 1 ]" \
    "$args under mpirun: exit $rc, $(cat "$dir/clash.log")"
  check "[ ! -e '$dir/clash.out' ]" "$args under mpirun: an output was written"
done

# Weights, mean separations and jackknife patches: the ranks share the
# patch-pair counts and the library sums their cells, each made by one rank,
# so the outputs are byte-identical to one process; without --jackknife the
# three counts are shared, with more ranks than counts too.
awk 'NR > 1 { printf "%.6f,%.6f,%.3f\n", $1 / 60, $2 / 60, 0.5 + (NR % 7) / 7 }' "$dir/d.txt" |
  sed '1i ra,dec,w' > "$dir/dw.csv"
awk 'NR > 1 { printf "%.6f,%.6f,%.3f\n", $1 / 60, $2 / 60, 0.8 + (NR % 3) / 4 }' "$dir/r.txt" |
  sed '1i ra,dec,w' > "$dir/rw.csv"
feat=(--weight-col w --mean-theta --theta-min 0.01 --log 10 --nbins 20 --png none -q --backend cpu)
"$cli" angcorr "$dir/dw.csv" "$dir/rw.csv" "${feat[@]}" --jackknife 9 -o "$dir/f1.out" --csv "$dir/f1.csv" \
  --save-rr "$dir/f1_rr.txt"
for k in 2 3; do
  timeout 240 "${mpirun[@]}" -np $k "$cli" angcorr "$dir/dw.csv" "$dir/rw.csv" "${feat[@]}" --jackknife 9 \
    --threads 1 -o "$dir/f$k.out" --csv "$dir/f$k.csv" --save-rr "$dir/f${k}_rr.txt" > "$dir/f$k.log" 2>&1
  check "cmp -s '$dir/f1.out' '$dir/f$k.out' && cmp -s '$dir/f1.csv' '$dir/f$k.csv' &&
    cmp -s '$dir/f1_cov.csv' '$dir/f${k}_cov.csv' && cmp -s '$dir/f1_rr.txt' '$dir/f${k}_rr.txt'" \
    "np $k with weights, jackknife, mean-theta differs from one process: $(cat "$dir/f$k.log")"
done
# Without patches the ranks share blocks of objects (4 blocks for 3 or 4
# ranks): the counts exact, the weighted and separation sums to rounding
# against one process, and byte-identical between rank counts of the same
# blocks.
"$cli" angcorr "$dir/dw.csv" "$dir/rw.csv" "${feat[@]}" -o "$dir/n1.out" --csv "$dir/n1.csv"
for k in 3 4; do
  timeout 240 "${mpirun[@]}" -np $k "$cli" angcorr "$dir/dw.csv" "$dir/rw.csv" "${feat[@]}" --threads 1 \
    -o "$dir/n$k.out" --csv "$dir/n$k.csv" > "$dir/n$k.log" 2>&1
done
# every field: equal, or (sums, omega) within 1e-12 relative; counts equal
close_csv='NR == FNR { a[FNR] = $0; next }
  FNR == 1 { for (i = 1; i <= NF; i++) exact[i] = ($i == "dd" || $i == "dr" || $i == "rr"); next }
  { n = split(a[FNR], x); for (i = 1; i <= NF; i++) { d = x[i] - $i; if (d < 0) d = -d; m = $i < 0 ? -$i : $i
      if (x[i] != $i && (exact[i] || d > 1e-12 * m)) bad++ } }
  END { exit bad > 0 }'
check "awk -F, '$close_csv' '$dir/n1.csv' '$dir/n4.csv'" \
  "np 4 with weights, no jackknife, not within rounding of one process: $(cat "$dir/n4.log")"
check "cmp -s '$dir/n3.csv' '$dir/n4.csv'" "np 3 and np 4 (the same blocks) differ: $(cat "$dir/n3.log")"
# the RR cells of one process given to a 3-rank job of the same data
timeout 240 "${mpirun[@]}" -np 3 "$cli" angcorr "$dir/dw.csv" "$dir/rw.csv" "${feat[@]}" --jackknife 9 \
  --threads 1 -o "$dir/g3.out" --csv "$dir/g3.csv" --rr "$dir/f1_rr.txt" > "$dir/g3.log" 2>&1
check "cmp -s '$dir/f1.csv' '$dir/g3.csv' && cmp -s '$dir/f1_cov.csv' '$dir/g3_cov.csv'" \
  "np 3 with RR cells given differs: $(cat "$dir/g3.log")"
# one rank cannot read its catalog, or its RR file is of other patches:
# every rank stops (none waits in the sums for it), that rank says why,
# nothing is written
printf 'ra,dec,w\n10,10,1\n11,abc,1\n' > "$dir/badw.csv"
"$cli" angcorr "$dir/dw.csv" "$dir/rw.csv" "${feat[@]}" --jackknife 4 -o "$dir/x.out" --csv "$dir/x.csv" \
  --save-rr "$dir/rr4.txt"
rm -f "$dir/x.out" "$dir/x.csv" "$dir/x_cov.csv"
for bad in catalog rr; do
  cat > "$dir/one_bad_f.sh" <<EOS
#!/bin/sh
d="$dir/dw.csv"; rr="$dir/f1_rr.txt"
if [ "\$OMPI_COMM_WORLD_RANK" = 1 ]; then
  if [ $bad = catalog ]; then d="$dir/badw.csv"; else rr="$dir/rr4.txt"; fi
fi
exec "$cli" angcorr "\$d" "$dir/rw.csv" ${feat[*]} --jackknife 9 --threads 1 -o "$dir/failed_f.out" --csv "$dir/failed_f.csv" --rr "\$rr"
EOS
  chmod +x "$dir/one_bad_f.sh"
  timeout 120 "${mpirun[@]}" -np 3 "$dir/one_bad_f.sh" > "$dir/badf.log" 2>&1
  rc=$?
  check "[ $rc -ne 0 ] && [ $rc -ne 124 ]" "a failing rank ($bad) with weights and jackknife: exit $rc"
  check "grep -q 'rank 1.*$( [ $bad = catalog ] && echo 'badw.csv:3' || echo 'rr4.txt:4')' '$dir/badf.log'" \
    "the failing rank ($bad) says why: $(cat "$dir/badf.log")"
  check "[ ! -e '$dir/failed_f.out' ] && [ ! -e '$dir/failed_f.csv' ]" "no output after a failed rank ($bad)"
done

# rank 1 reads another copy under the same name (a stale file on one
# node): the ranks compare what they read, the job fails, nothing written
mkdir -p "$dir/node1"
awk 'NR == 2 { $1 = $1 + 1 } { print }' "$dir/d.txt" > "$dir/node1/d.txt"
cat > "$dir/other_copy.sh" <<EOS
#!/bin/sh
d="$dir/d.txt"
if [ "\$OMPI_COMM_WORLD_RANK" = 1 ]; then d="$dir/node1/d.txt"; fi
exec "$cli" angcorr "\$d" "$dir/r.txt" --png none -q --threads 1 -o "$dir/copies.out"
EOS
chmod +x "$dir/other_copy.sh"
timeout 120 "${mpirun[@]}" -np 2 "$dir/other_copy.sh" > "$dir/copies.log" 2>&1
rc=$?
check "[ $rc -eq 1 ] && [ \$(grep -c 'the ranks read different catalogs' '$dir/copies.log') -eq 1 ] && [ ! -e '$dir/copies.out' ]" \
  "ranks reading different copies of a catalog: exit $rc, $(cat "$dir/copies.log")"

echo "test_angcorr_mpi: $((27 - fail)) passed, $fail failed"
[ $fail -eq 0 ]
