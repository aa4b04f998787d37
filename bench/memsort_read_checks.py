"""Time reading a memsort.bin back with its checks: Python's read_memsort
(with and without the checks of the values) and pk_memsort_read with and
without the rows. Usage: PAIRKIT_LIB=build/libpairkit.so PYTHONPATH=python
/usr/bin/python3 bench/memsort_read_checks.py OUT_DIR (a folder `pairkit
memsort` wrote; Debian's python3, with the python3-numpy of
scripts/deps.sh); 5 runs each, median and min."""
import time, ctypes, statistics, sys
import numpy as np
import pairkit
from pairkit import _memsort as m
p=sys.argv[1] if len(sys.argv) > 1 else 'memsort-out'
def t(fn, n=5):
    xs=[]
    for _ in range(n):
        a=time.perf_counter(); fn(); xs.append(time.perf_counter()-a)
    return statistics.median(xs), min(xs)
print("read_memsort (all checks)  median %.3f min %.3f s" % t(lambda: pairkit.read_memsort(p)))
orig=m._check_values
m._check_values=lambda *a: None
print("read_memsort (no value check) median %.3f min %.3f s" % t(lambda: pairkit.read_memsort(p)))
m._check_values=orig
lib=m._load()
def cread(rows):
    ctx=m.new_context(1); table=m._Regions(); res=m._Result()
    lib.pk_memsort_result_init(ctypes.byref(res))
    st=lib.pk_memsort_read(ctypes.byref(ctx), (p+'/memsort.bin').encode(), rows, ctypes.byref(table), ctypes.byref(res))
    assert st==0, ctx.message
    lib.pk_memsort_result_free(ctypes.byref(res))
print("pk_memsort_read with rows  median %.3f min %.3f s" % t(lambda: cread(1)))
print("pk_memsort_read plans only median %.3f min %.3f s" % t(lambda: cread(0)))
