#!/bin/sh
# Every C, CUDA and header file of the repository as clang-format 14 and
# .clang-format lay it out. Exit 77 (skipped) without clang-format 14, whose
# layout the config was written for; 1 with the files that differ.
cd "$(dirname "$0")/.." || exit 1
cf=$(command -v clang-format-14 || true)
if [ -z "$cf" ] && command -v clang-format >/dev/null 2>&1 &&
    clang-format --version | grep -q 'version 14\.'; then
    cf=$(command -v clang-format)
fi
if [ -z "$cf" ]; then
    echo "clang-format 14 not found: format check skipped (apt-get install clang-format-14)"
    exit 77
fi
if ! command -v git >/dev/null 2>&1 || ! git rev-parse --git-dir >/dev/null 2>&1; then
    echo "not a git checkout: format check skipped"
    exit 77
fi
bad=0
for f in $(git ls-files '*.c' '*.h' '*.cu' '*.cuh'); do
    [ -f "$f" ] || continue
    if ! "$cf" --style=file "$f" | cmp -s "$f" -; then
        echo "$f: not as clang-format lays it out (run: $cf -i $f)"
        bad=1
    fi
done
[ $bad -eq 0 ] && echo "all files formatted"
exit $bad
