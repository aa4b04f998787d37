#!/usr/bin/env bash
# cmake --install into a temporary prefix, then the README's library example
# ("## Library use") built against the installed copy only, through
# pairkit.pc: linked to libpairkit.so (with an rpath) and to libpairkit.a
# (pkg-config --static). Both must run and print the same counts as the
# installed command.
set -u
build=${1:?usage: test_install.sh BUILD_DIR}
root=$(cd "$(dirname "$0")/.." && pwd)
dir=$(mktemp -d /tmp/pairkit_install_XXXXXX)
trap 'rm -rf "$dir"' EXIT
fail=0 n=0
check() { n=$((n + 1)); if eval "$1"; then :; else echo "check failed: $2"; fail=$((fail + 1)); fi; }

for tool in cc pkg-config; do
  command -v $tool > /dev/null || { echo "test_install: no $tool, skipped"; exit 77; }
done
prefix="$dir/prefix"
cmake --install "$build" --prefix "$prefix" > "$dir/install.log" 2>&1
check "[ $? -eq 0 ]" "cmake --install: $(tail -3 "$dir/install.log")"
libdir=$(dirname "$(find "$prefix" -name pairkit.pc | head -1)")/..
export PKG_CONFIG_PATH="$libdir/pkgconfig"
check "[ \"\$(pkg-config --variable=includedir pairkit)\" -ef '$prefix/include' ]" \
  "pairkit.pc's includedir is not the prefix's: $(pkg-config --variable=includedir pairkit)"

# libpairkit.so exports the functions the public headers declare, and only those
if command -v nm > /dev/null; then
  cat "$prefix"/include/pairkit/*.h | tr '\n' ' ' | grep -oE '[a-z_0-9*]+ \**pk_[a-z_0-9]+\(' |
    grep -oE 'pk_[a-z_0-9]+\(' | tr -d '(' | sort -u > "$dir/declared.txt"
  nm -D --defined-only "$libdir/libpairkit.so" | awk '$2 == "T" {print $3}' | sort -u > "$dir/exported.txt"
  check "[ -s '$dir/declared.txt' ] && cmp -s '$dir/declared.txt' '$dir/exported.txt'" \
    "exported symbols differ from the headers' functions: $(comm -3 "$dir/declared.txt" "$dir/exported.txt" | head -5 | tr '\n' ' ')"
fi

# the example, as the README shows it
awk '/^## Library use/ {s = 1} s && /^```c/ {c = 1; next} c && /^```/ {exit} c' "$root/README.md" > "$dir/wtheta.c"
check "grep -q 'int main' '$dir/wtheta.c'" "no example found in README.md"

# two small catalogs in the course format
for f in data flat; do
  { echo 300; sed -n 2,301p "$root/data/galaxy/${f}_100k_arcmin.txt"; } > "$dir/$f.txt"
done

cc -std=c11 "$dir/wtheta.c" $(pkg-config --cflags --libs pairkit) -Wl,-rpath,"$libdir" -o "$dir/wtheta_shared" \
  > "$dir/cc_shared.log" 2>&1
check "[ $? -eq 0 ]" "shared build: $(cat "$dir/cc_shared.log")"
cc -std=c11 "$dir/wtheta.c" $(pkg-config --cflags pairkit) "$libdir/libpairkit.a" \
  $(pkg-config --static --libs pairkit | sed 's/-lpairkit//') -o "$dir/wtheta_static" > "$dir/cc_static.log" 2>&1
check "[ $? -eq 0 ]" "static build: $(cat "$dir/cc_static.log")"
check "! ldd '$dir/wtheta_static' | grep -q libpairkit" "the static build loads libpairkit.so"

"$dir/wtheta_shared" "$dir/data.txt" "$dir/flat.txt" > "$dir/shared.out" 2>&1
check "[ $? -eq 0 ] && [ \$(grep -c '^bin ' '$dir/shared.out') -eq 4 ]" "shared run: $(cat "$dir/shared.out")"
"$dir/wtheta_static" "$dir/data.txt" "$dir/flat.txt" > "$dir/static.out" 2>&1
check "[ $? -eq 0 ] && cmp -s '$dir/shared.out' '$dir/static.out'" "static run differs: $(cat "$dir/static.out")"
# the same counts from the installed command (omega.out: bin, omega, DD, DR, RR)
"$prefix/bin/pairkit" angcorr "$dir/data.txt" "$dir/flat.txt" -o "$dir/omega.out" --png none -q --backend cpu
check "[ $? -eq 0 ]" "the installed command failed"
want=$(awk 'NR == 2 {print $3, $4, $5}' "$dir/omega.out")
got=$(awk 'NR == 1 {print $4, $6, $8}' "$dir/shared.out")
check "[ \"$want\" = \"$got\" ]" "first bin: command '$want', example '$got'"
"$dir/wtheta_shared" "$dir/none.txt" "$dir/flat.txt" > "$dir/err.out" 2>&1
check "[ $? -eq 1 ] && grep -q 'none.txt' '$dir/err.out'" "a missing file: $(cat "$dir/err.out")"

# the Python module, installed beside the library, loads that library
pydir=$(find "$prefix" -path '*dist-packages/pairkit/__init__.py' | head -1)
if command -v python3 > /dev/null; then
  check "[ -n '$pydir' ] && [ -f \"\$(dirname '$pydir')/_installed.py\" ]" "the Python module was not installed"
fi
if ! /usr/bin/python3 -c 'import numpy' 2> /dev/null; then
  echo "test_install: no numpy for /usr/bin/python3, the installed Python module not run"
else
  PYTHONPATH=$(dirname "$(dirname "$pydir")") PYTHONDONTWRITEBYTECODE=1 PAIRKIT_LIB= /usr/bin/python3 -c '
import sys, numpy as np, pairkit
ra, dec = np.loadtxt(sys.argv[1], skiprows=1, unpack=True) / 60
res = pairkit.DDtheta_mocks(0, 1, np.array([0.0, 1.0, 180.0]), ra, dec, RA2=ra[:1], DEC2=dec[:1])
img = pairkit.dft_image([10.0, -20.0], [5.0, 0.0], [0.0, 1.0], [1.0, 2.0], npix=4, cell=1e-3)
print(pairkit.library_path(), round(float(img[2, 2]), 9), res["npairs"].sum())' "$dir/data.txt" > "$dir/python.out" 2>&1
  check "[ $? -eq 0 ] && [ \"\$(dirname \"\$(cut -d' ' -f1 '$dir/python.out')\")\" -ef '$libdir' ] && grep -q ' 3.0 300$' '$dir/python.out'" \
    "the installed Python module: $(cat "$dir/python.out")"
fi

echo "test_install: $((n - fail)) passed, $fail failed"
[ $fail -eq 0 ]
