"""Plan and fill of zkVM memory traces: the memsort binding."""
import contextlib
import ctypes
import os
import re
import threading
import weakref

import numpy as np

from ._core import (PairkitError, _Context, _check, _count, _fspath, _one_dimensional, _plain, backend_code,
                    interruptible, load, new_context)


# ---- the C structures (memsort.h) --------------------------------------------

_U32, _U64 = ctypes.c_uint32, ctypes.c_uint64


class _Region(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char * 16), ("base", _U32), ("size", _U64), ("max_instances", _U32),
                ("instance_entries", _U32)]


class _Regions(ctypes.Structure):
    _fields_ = [("n_regions", _U32), ("region", _Region * 8)]


class _Trace(ctypes.Structure):
    _fields_ = [("n_entries", _U64), ("addr", ctypes.POINTER(_U32)), ("n_chunks", _U32),
                ("chunk_start", ctypes.POINTER(_U64)), ("pinned", ctypes.c_int)]


class _GenOptions(ctypes.Structure):
    _fields_ = [("n_entries", _U64), ("seed", _U64), ("chunk_entries", _U32), ("awkward", ctypes.c_int)]


class _Options(ctypes.Structure):
    _fields_ = [("backend", ctypes.c_int), ("kernel", ctypes.c_int), ("n_workers", _U32), ("worker", _U32)]


class _Instance(ctypes.Structure):
    _fields_ = [(name, _U32) for name in ("gid", "region", "index", "owned")] + [("first_row", _U64)] + \
               [(name, _U32) for name in ("n_rows", "first_addr", "last_addr", "first_chunk", "first_skip",
                                          "first_skip_total", "last_chunk", "last_include", "last_include_total",
                                          "has_prev", "prev_addr", "prev_value", "n_runs")] + \
               [(name, _U64) for name in ("runs_offset", "values_offset", "counts_offset")]


class _Run(ctypes.Structure):
    _fields_ = [("addr", _U32), ("count", _U32)]


class _Chunk(ctypes.Structure):
    _fields_ = [("index", _U32), ("first_position", _U64), ("addr", ctypes.POINTER(_U32)), ("n_entries", _U64)]


class _Fill(ctypes.Structure):
    _fields_ = [("plan", ctypes.POINTER(_Instance)), ("pairs", ctypes.POINTER(_U32)), ("capacity", _U64),
                ("n_rows", _U64), ("chunk_rows", ctypes.POINTER(_U32))]


class _Stats(ctypes.Structure):
    _fields_ = [("seconds", ctypes.c_double), ("device_ms", ctypes.c_double), ("upload_ms", ctypes.c_double),
                ("device_bytes", _U64), ("host_bytes", _U64), ("pcie_bytes", _U64), ("kernel", ctypes.c_int),
                ("gpu_too_small", ctypes.c_int)]


class _Result(ctypes.Structure):
    _fields_ = [("n_entries", _U64), ("n_chunks", _U32), ("n_workers", _U32), ("worker", _U32),
                ("n_instances", _U32), ("instances", ctypes.POINTER(_Instance)), ("region_entries", _U64 * 8),
                ("n_owned", _U32), ("n_runs", _U64), ("runs", ctypes.POINTER(_Run)), ("n_values", _U64),
                ("values", ctypes.POINTER(_U32)), ("chunk_counts", ctypes.POINTER(_U32)), ("chunk_start", ctypes.POINTER(_U64)),
                ("stats", _Stats),
                ("cap_runs", _U64), ("cap_values", _U64), ("cap_counts", _U64), ("cap_instances", _U32),
                ("host_pinned", ctypes.c_int), ("backend_state", ctypes.c_void_p)]


def _dtype(structure):
    """The numpy dtype of a ctypes structure, padding and all, by field offset."""
    names, formats, offsets = [], [], []
    for name, ctype in structure._fields_:
        names.append(name)
        formats.append({_U32: np.uint32, _U64: np.uint64}[ctype])
        offsets.append(getattr(structure, name).offset)
    return np.dtype({"names": names, "formats": formats, "offsets": offsets,
                     "itemsize": ctypes.sizeof(structure)})


_INSTANCE = _dtype(_Instance)
_RUN = _dtype(_Run)


def _declare(lib):
    """The memsort functions' argument and result types."""
    P = ctypes.POINTER
    lib.pk_memsort_regions_get.argtypes = [P(_Context), ctypes.c_char_p, P(_Regions)]
    lib.pk_memsort_generate.argtypes = [P(_Context), P(_Regions), P(_GenOptions), P(_Trace)]
    lib.pk_memsort_trace_free.argtypes = [P(_Trace)]
    lib.pk_memsort_trace_read.argtypes = [P(_Context), ctypes.c_char_p, P(_Regions), P(_Trace)]
    lib.pk_memsort_trace_check.argtypes = [P(_Context), P(_Regions), P(_Trace)]
    lib.pk_memsort_trace_write.argtypes = [P(_Context), ctypes.c_char_p, P(_Trace)]
    lib.pk_memsort_generate_dir.argtypes = [P(_Context), P(_Regions), P(_GenOptions), ctypes.c_char_p]
    lib.pk_memsort_result_init.argtypes = [P(_Result)]
    lib.pk_memsort_result_free.argtypes = [P(_Result)]
    lib.pk_memsort_run.argtypes = [P(_Context), P(_Options), P(_Regions), P(_Trace), P(_Result)]
    lib.pk_memsort_trace_pin.argtypes = [P(_Context), P(_Trace)]
    lib.pk_memsort_trace_unpin.argtypes = [P(_Trace)]
    lib.pk_memsort_fill_from_chunks.argtypes = [P(_Context), P(_Chunk), _U32, P(_Fill), _U32]
    lib.pk_memsort_read.argtypes = [P(_Context), ctypes.c_char_p, ctypes.c_int, P(_Regions), P(_Result)]
    lib.pk_memsort_kernel_from_name.argtypes = [ctypes.c_char_p]
    lib.pk_memsort_kernel_name.argtypes = [ctypes.c_int]
    lib.pk_memsort_kernel_name.restype = ctypes.c_char_p
    for name in ("pk_memsort_regions_get", "pk_memsort_generate", "pk_memsort_trace_read", "pk_memsort_trace_check",
                 "pk_memsort_trace_write", "pk_memsort_generate_dir", "pk_memsort_run",
                 "pk_memsort_kernel_from_name", "pk_memsort_trace_pin", "pk_memsort_fill_from_chunks",
                 "pk_memsort_read"):
        getattr(lib, name).restype = ctypes.c_int


def _load():
    return load(_declare)


def _regions(lib, ctx, regions):
    if not isinstance(regions, (str, bytes, os.PathLike)):
        raise PairkitError("regions must be 'default', 'zisk' or a region table file, got %r" % (regions,))
    table = _Regions()
    _check(lib.pk_memsort_regions_get(ctypes.byref(ctx), _fspath(regions), ctypes.byref(table)), ctx)
    return table


def _take_trace(lib, trace):
    """Copies of a library-owned trace's arrays; the trace is freed."""
    try:
        n, c = trace.n_entries, trace.n_chunks
        addr = np.ctypeslib.as_array(trace.addr, (n,)).copy() if n else np.zeros(0, np.uint32)
        starts = np.ctypeslib.as_array(trace.chunk_start, (c + 1,)).copy()
    finally:
        lib.pk_memsort_trace_free(ctypes.byref(trace))
    return addr, starts


def _trace_from(lib, ctx, call, check):
    """(addr, chunk_start) of the library-owned trace that call(trace) makes,
    run interruptible; a trace made just before a Ctrl-C is freed, not kept."""
    trace = _Trace()
    try:
        with interruptible(ctx):
            st = call(trace)
        check(st, ctx)
    except BaseException:
        lib.pk_memsort_trace_free(ctypes.byref(trace))
        raise
    return _take_trace(lib, trace)


def _gen_options(n_entries, seed, chunk_entries, awkward):
    return _GenOptions(_count(n_entries, "n_entries", 1, 1 << 29), _count(seed, "seed", 0, (1 << 64) - 1),
                       _count(0 if chunk_entries is None else chunk_entries, "chunk_entries", 0, (1 << 32) - 1),
                       1 if awkward else 0)


def _gen_check(st, ctx):
    """_check for the generator, whose chunks are not files here."""
    try:
        _check(st, ctx)
    except PairkitError as e:
        raise PairkitError(str(e).replace(" chunk files,", " chunks,")) from None


def memsort_generate(n_entries, seed=1, chunk_entries=None, awkward=False, regions="default"):
    """A synthetic trace as `pairkit memsort-gen` writes it, deterministic
    from the seed: (addr, chunk_start), uint32 raw addresses and the uint64
    start of each chunk plus the end (chunk_entries None or 0: 2^18 a
    chunk, the prover's steps). awkward=True gives the cases that break planners."""
    lib = _load()
    ctx = new_context(0)
    table = _regions(lib, ctx, regions)
    opts = _gen_options(n_entries, seed, chunk_entries, awkward)
    return _trace_from(lib, ctx, lambda trace: lib.pk_memsort_generate(
        ctypes.byref(ctx), ctypes.byref(table), ctypes.byref(opts), ctypes.byref(trace)), _gen_check)


def memsort_generate_dir(trace_dir, n_entries, seed=1, chunk_entries=None, awkward=False, regions="default"):
    """The trace memsort_generate makes, written straight to the chunk files
    TRACE_DIR/mem_addr_NNNN.bin a chunk at a time, as `pairkit memsort-gen`
    writes it (a realistic trace never held whole in memory; an awkward
    one is). All chunk files or none; an older trace's further chunk files
    in the folder are removed."""
    lib = _load()
    ctx = new_context(0)
    table = _regions(lib, ctx, regions)
    opts = _gen_options(n_entries, seed, chunk_entries, awkward)
    with interruptible(ctx):
        st = lib.pk_memsort_generate_dir(ctypes.byref(ctx), ctypes.byref(table), ctypes.byref(opts),
                                         _fspath(trace_dir))
    _check(st, ctx)


def write_trace(trace_dir, addr, chunk_entries=None, chunk_start=None, regions="default"):
    """A trace held in an array written as the chunk files
    TRACE_DIR/mem_addr_NNNN.bin that `pairkit memsort` and read_trace take:
    cut as memsort() cuts it (chunk_entries, default 2^18, or chunk_start),
    every entry first checked against the table (an error names addr[i]),
    then all chunk files or none; an older trace's further chunk files in
    the folder are removed."""
    lib = _load()
    ctx = new_context(0)
    table = _regions(lib, ctx, regions)
    a = _addresses(addr)
    starts = _chunk_starts(a.size, chunk_entries, chunk_start)
    trace = _Trace(a.size, a.ctypes.data_as(ctypes.POINTER(_U32)), starts.size - 1,
                   starts.ctypes.data_as(ctypes.POINTER(_U64)), 0)
    _check_trace(lib.pk_memsort_trace_check(ctypes.byref(ctx), ctypes.byref(table), ctypes.byref(trace)), ctx, starts)
    with interruptible(ctx):
        st = lib.pk_memsort_trace_write(ctypes.byref(ctx), _fspath(trace_dir), ctypes.byref(trace))
    _check(st, ctx)


def read_trace(trace_dir, regions="default"):
    """The chunk files TRACE_DIR/mem_addr_NNNN.bin, checked against the
    table as the command line checks them: (addr, chunk_start)."""
    lib = _load()
    ctx = new_context(0)
    table = _regions(lib, ctx, regions)
    return _trace_from(lib, ctx, lambda trace: lib.pk_memsort_trace_read(
        ctypes.byref(ctx), _fspath(trace_dir), ctypes.byref(table), ctypes.byref(trace)), _check)


def _addresses(addr):
    raw = _one_dimensional(addr, "addr", "addresses")
    if raw.size == 0:
        return np.zeros(0, np.uint32)  # an empty list is an empty trace, whatever its dtype
    if raw.dtype.kind not in "iu":
        raise PairkitError("addr must hold integers (raw u32 addresses), got dtype %s" % (raw.dtype,))
    if raw.dtype != np.uint32 and raw.size:
        out = np.flatnonzero((raw < 0) | (raw > 0xFFFFFFFF))
        if out.size:
            raise PairkitError("addr[%d] = %d is not a 32-bit address" % (out[0], raw[out[0]]))
    if raw.size >= 1 << 32:
        raise PairkitError("addr: %d entries, a trace holds fewer than 2^32" % raw.size)
    return np.ascontiguousarray(raw, dtype=np.uint32)


def _chunk_starts(n, chunk_entries, chunk_start):
    if chunk_start is not None and chunk_entries is not None:
        raise PairkitError("give chunk_entries or chunk_start, not both")
    if chunk_start is not None:
        try:
            raw = np.asarray(chunk_start)
        except Exception as e:
            raise PairkitError("chunk_start: not an array of entry indices (%s)" % (e,)) from None
        if raw.ndim != 1 or raw.dtype.kind not in "iu":
            raise PairkitError("chunk_start must be a one-dimensional array of entry indices")
        going_back = raw.size > 1 and bool(np.any(raw[1:] < raw[:-1]))  # np.diff wraps for unsigned
        if raw.size < 2 or raw.size > 4097 or raw[0] != 0 or raw[-1] != n or going_back:
            raise PairkitError("chunk_start must run from 0 to len(addr) = %d without going back, with 1 to 4096 "
                               "chunks" % n)
        return np.ascontiguousarray(raw, dtype=np.uint64)
    size = _count(0 if chunk_entries is None else chunk_entries, "chunk_entries", 0, 1 << 32)
    size = size or 1 << 18  # 0 or None: the prover's 2^18
    k = max(1, -(-n // size))
    if k > 4096:
        raise PairkitError("chunk_entries %d cuts %d entries into %d chunks; at most 4096" % (size, n, k))
    return np.minimum(np.arange(k + 1, dtype=np.uint64) * size, n).astype(np.uint64)


class _Buffers:
    """One pk_memsort_result, freed when the last reference goes: the
    Memsort that runs into it and every view of its buffers hold one, so
    a view outlives close() and the next run (which then takes new
    buffers) with its values unchanged."""

    def __init__(self, lib):
        self._lib = lib
        self.res = _Result()
        lib.pk_memsort_result_init(ctypes.byref(self.res))
        self._views = []  # weak references to the memory every view was made on

    def __del__(self):
        try:
            self._lib.pk_memsort_result_free(ctypes.byref(self.res))
        except Exception:  # the interpreter shutting down
            pass

    def watch(self, data):
        """Note the memory a view is made on (a view of a view keeps it too)."""
        self._views = [r for r in self._views if r() is not None] + [weakref.ref(data)]

    def viewed(self):
        """Whether any view of these buffers is still alive."""
        return any(r() is not None for r in self._views)


def _view(ptr, n, dtype, owner):
    """The library's buffer as a numpy array, not copied, keeping owner
    (the _Buffers holding it) alive as long as the view is referenced."""
    if not n:
        return np.zeros(0, dtype)
    data = (ctypes.c_char * (n * dtype.itemsize)).from_address(ctypes.addressof(ptr.contents))
    data._owner = owner
    owner.watch(data)
    return np.frombuffer(data, dtype=dtype)


_CHUNK_ENTRY = re.compile(r"mem_addr_(\d{4,})\.bin entry (\d+)")


def _check_trace(st, ctx, starts):
    """_check for a trace held in an array: the library names a chunk file
    and an entry in it; here they are an index into addr."""
    try:
        _check(st, ctx)
    except PairkitError as e:
        def index(m):
            c, k = int(m.group(1)), int(m.group(2))
            return "addr[%d] (chunk %d, entry %d)" % (int(starts[c]) + k, c, k) if c < starts.size else m.group(0)

        raise PairkitError(_CHUNK_ENTRY.sub(index, str(e))) from None


class Memsort:
    """Runs of plan and fill that keep their buffers between calls, as a
    prover keeps them: pinned host memory and GPU memory on CUDA, the
    histograms on the CPU (the first run allocates, later runs of traces no
    larger reuse). close() (or leaving a `with` block) frees them. One run
    at a time per object (a second thread gets an error); make one object
    per thread.

        with pairkit.Memsort() as m:
            for addr in traces:
                res = m.run(addr, workers=16, worker=3, backend="cuda")

    With copy=False, drop a run's views (del res) before the next run to
    have it reuse the buffers; views still alive keep theirs.
    """

    def __init__(self):
        self._lib = _load()
        self._buf = _Buffers(self._lib)
        self._open = True
        self._busy = threading.Lock()

    def close(self):
        """Frees the buffers, once no view of them (copy=False) is left."""
        with self._busy:
            if self._open:
                self._buf = None
                self._open = False

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:  # a half-made object, or the interpreter shutting down
            pass

    def run(self, addr, chunk_entries=None, chunk_start=None, regions="default", workers=1, worker=0,
            backend="auto", kernel=None, nthreads=0, copy=True):
        """As memsort(): the same arguments and the same dict. With
        copy=False "runs", "values" and "chunk_counts" are views of this
        object's buffers where they can be (no copy of a trace's worth of
        rows): a view keeps its buffers, past close() and the next run
        (which then takes new ones); by default copies."""
        if not self._busy.acquire(blocking=False):
            raise PairkitError("this Memsort is running in another thread; make one Memsort per thread")
        try:
            return self._run(addr, chunk_entries, chunk_start, regions, workers, worker, backend, kernel, nthreads,
                             copy)
        finally:
            self._busy.release()

    def _run(self, addr, chunk_entries, chunk_start, regions, workers, worker, backend, kernel, nthreads, copy):
        if not self._open:
            raise PairkitError("this Memsort is closed")
        lib = self._lib
        a = _addresses(addr)
        starts = _chunk_starts(a.size, chunk_entries, chunk_start)
        n_workers = _count(workers, "workers", 1, (1 << 32) - 1)
        w = _count(worker, "worker", 0, n_workers - 1)
        code = 0
        if kernel is not None:
            code = lib.pk_memsort_kernel_from_name(str(kernel).encode())
            if code < 0:
                raise PairkitError("kernel: unknown kernel %r" % (kernel,))
        ctx = new_context(nthreads)
        table = _regions(lib, ctx, regions)
        trace = _Trace(a.size, a.ctypes.data_as(ctypes.POINTER(_U32)), starts.size - 1,
                       starts.ctypes.data_as(ctypes.POINTER(_U64)), 0)
        opts = _Options(backend_code(backend), code, n_workers, w)
        if self._buf.viewed():  # the last run's views stay as they are: new buffers for this one
            self._buf = _Buffers(lib)
        owner = self._buf
        res = owner.res
        with interruptible(ctx):
            st = lib.pk_memsort_run(ctypes.byref(ctx), ctypes.byref(opts), ctypes.byref(table), ctypes.byref(trace),
                                    ctypes.byref(res))
        _check_trace(st, ctx, starts)
        inst = _view(res.instances, res.n_instances, _INSTANCE, owner).copy()
        # the owned instances' values packed in gid order, as memsort.bin
        # holds them (a kernel may keep every row, at global positions):
        # one copy from the library's buffer
        owned = inst[inst["owned"] != 0]
        extent = int((owned["values_offset"] + owned["n_rows"]).max()) if owned.size else 0
        every = _view(res.values, extent, np.dtype(np.uint32), owner)
        packed = np.zeros(inst.size, np.uint64)
        packed[inst["owned"] != 0] = np.cumsum(owned["n_rows"], dtype=np.uint64) - owned["n_rows"]
        first = int(owned["values_offset"][0]) if owned.size else 0
        if not copy and np.array_equal(owned["values_offset"], packed[inst["owned"] != 0] + first):
            values = every[first:]  # already packed: a view
        else:
            values = np.concatenate([every[o:o + k] for o, k in zip(owned["values_offset"].tolist(),
                                                                    owned["n_rows"].tolist())] or [every[:0]])
        inst["values_offset"] = packed
        owned_row = np.zeros(inst.size, np.uint64)  # counts_offset: the instance's row of chunk_counts
        owned_row[inst["owned"] != 0] = np.arange(owned.size, dtype=np.uint64)
        inst["counts_offset"] = owned_row

        def out(a):
            return a.copy() if copy else a

        counts = out(_view(res.chunk_counts, res.n_owned * res.n_chunks, np.dtype(np.uint32), owner))
        return {"instances": inst, "runs": out(_view(res.runs, res.n_runs, _RUN, owner)), "values": values,
                "chunk_counts": counts.reshape(res.n_owned, res.n_chunks),
                "region_entries": np.array(res.region_entries[:table.n_regions], dtype=np.uint64),
                "chunk_start": _view(res.chunk_start, res.n_chunks + 1, np.dtype(np.uint64), owner).copy(),
                "kernel": lib.pk_memsort_kernel_name(res.stats.kernel).decode(), "seconds": res.stats.seconds,
                "workers": n_workers, "worker": w}


_pins = {}  # (address, bytes) -> [blocks holding it, the pinned _Trace]
_pins_lock = threading.Lock()


@contextlib.contextmanager
def memsort_pin(addr):
    """Page-lock a trace's memory while the block runs, so that the GPU
    copies it at full speed (a prover keeps its trace pinned); runs given
    this very array inside the block use it. addr must be a contiguous
    uint32 array (any other would be converted, and the copy pinned for
    nothing). Blocks may nest and threads may pin one array at once: it is
    pinned by the first and unpinned by the last. No effect without a CUDA
    device.

        with pairkit.memsort_pin(addr), pairkit.Memsort() as m:
            res = [m.run(addr, workers=16, worker=w, backend="cuda") for w in range(16)]
    """
    if not (isinstance(addr, np.ndarray) and addr.dtype == np.uint32 and addr.ndim == 1 and
            addr.flags["C_CONTIGUOUS"]):
        raise PairkitError("memsort_pin: addr must be a contiguous one-dimensional uint32 array")
    lib = _load()
    key = (addr.ctypes.data, addr.nbytes)
    with _pins_lock:  # pinned once however many blocks (threads, nesting) pin it
        if key in _pins:
            _pins[key][0] += 1
        else:
            ctx = new_context(0)
            trace = _Trace(addr.size, addr.ctypes.data_as(ctypes.POINTER(_U32)), 0, None, 0)
            _check(lib.pk_memsort_trace_pin(ctypes.byref(ctx), ctypes.byref(trace)), ctx)
            _pins[key] = [1, trace]
    try:
        yield addr
    finally:
        with _pins_lock:
            _pins[key][0] -= 1
            if _pins[key][0] == 0:
                lib.pk_memsort_trace_unpin(ctypes.byref(_pins.pop(key)[1]))


def memsort(addr, chunk_entries=None, chunk_start=None, regions="default", workers=1, worker=0, backend="auto",
            kernel=None, nthreads=0):
    """Plan and fill for worker `worker` of `workers`
    (docs/memsort.md): addr is the trace (raw u32 addresses, entry i having
    the value i), cut into chunks of chunk_entries (None: 2^18, the
    prover's steps) or at chunk_start (the start of each chunk plus the
    end; not both). The trace is checked first: an unaligned address, one
    in no region or a region over its capacity is an error naming the index
    in addr (and the chunk and entry). Ctrl-C stops the call.

    Returns a dict: "instances", a structured array of every instance's plan
    by gid (the fields of pk_memsort_instance: gid, region, index, owned,
    first_row, n_rows, first_addr, last_addr, first_chunk, first_skip,
    first_skip_total, last_chunk, last_include, last_include_total,
    has_prev, prev_addr, prev_value, and for owned ones n_runs, runs_offset
    and values_offset into "runs" and "values", and counts_offset, the
    instance's row of "chunk_counts"); "runs" (fields addr, count), "values"
    (uint32 trace positions) and "chunk_counts" (n_owned x n_chunks) of the
    owned instances in gid order; "region_entries", "kernel" and "seconds"
    (the library's own time). memsort_rows(result, gid) expands an owned
    instance into its rows. For many traces, Memsort keeps the buffers
    between runs."""
    with Memsort() as m:
        return m.run(addr, chunk_entries, chunk_start, regions, workers, worker, backend, kernel, nthreads)


_FILE_HEADER = np.dtype([("magic", "S8"), ("version", "<u4"), ("header_bytes", "<u4"), ("n_entries", "<u8"),
                         ("n_chunks", "<u4"), ("n_regions", "<u4"), ("n_instances", "<u4"), ("n_owned", "<u4"),
                         ("n_workers", "<u4"), ("worker", "<u4"), ("n_runs", "<u8"), ("n_values", "<u8"),
                         ("region_bytes", "<u4"), ("instance_bytes", "<u4")])
_FILE_REGION = np.dtype([("name", "S16"), ("base", "<u4"), ("max_instances", "<u4"), ("size", "<u8"),
                         ("entries", "<u8"), ("instance_entries", "<u4"), ("reserved", "<u4")])
_FILE_INSTANCE = np.dtype([(n, "<u4") for n in ("gid", "region", "index", "owned")] + [("first_row", "<u8")] +
                          [(n, "<u4") for n in ("n_rows", "first_addr", "last_addr", "first_chunk", "first_skip",
                                                "first_skip_total", "last_chunk", "last_include",
                                                "last_include_total", "has_prev", "prev_addr", "prev_value",
                                                "n_runs", "reserved")] +
                          [("runs_offset", "<u8"), ("values_offset", "<u8")])


def _binary_file(path, name):
    """(path, bytes, section) of a file pairkit wrote (path: the file, or
    the folder holding `name`), read once into a read-only array;
    section(offset, count, dtype, what) is a view of `count` items there
    and the offset of the next section (8-byte aligned), a PairkitError
    naming the file when it is cut short."""
    path = os.fsdecode(path)  # a bytes name too (os.path.join takes one kind)
    if os.path.isdir(path):
        path = os.path.join(path, name)
    try:
        data = np.fromfile(path, dtype=np.uint8)
    except OSError as e:
        raise PairkitError("%s: %s" % (path, e.strerror or e)) from None
    data.flags.writeable = False

    def section(offset, count, dtype, what):
        end = offset + count * dtype.itemsize
        if end > data.size:
            verb = "take" if what.endswith("s") else "takes"  # "the runs take", "the header takes"
            raise PairkitError("%s: cut short: the %s %s bytes %d .. %d, the file has %d" % (path, what, verb, offset,
                                                                                        end, data.size))
        return data[offset:end].view(dtype), (end + 7) // 8 * 8

    return path, data, section


def _check_plans(path):
    """The library's checks of a memsort.bin's plans (without its rows)."""
    lib = _load()
    ctx = new_context(1)
    table, res = _Regions(), _Result()
    lib.pk_memsort_result_init(ctypes.byref(res))
    try:
        _check(lib.pk_memsort_read(ctypes.byref(ctx), _fspath(path), 0, ctypes.byref(table), ctypes.byref(res)),
               ctx)
    finally:
        lib.pk_memsort_result_free(ctypes.byref(res))


def _check_runs(path, inst, runs, n_values):
    """The checks pk_memsort_read makes of the runs when it reads them: the
    owned instances' runs lie one after another, each non-empty, at an
    8-byte-aligned address after the run before it, from the instance's
    first_addr to its last_addr, their counts adding up to its n_rows."""
    own = inst[inst["owned"] != 0]
    if own.size == 0:
        return
    n_runs = own["n_runs"].astype(np.uint64)
    ends = np.cumsum(n_runs)
    starts = ends - n_runs
    values_ends = np.cumsum(own["n_rows"].astype(np.uint64))
    if (np.any(n_runs < 1) or np.any(n_runs > own["n_rows"]) or int(ends[-1]) != runs.size or
            np.any(own["runs_offset"] != starts) or np.any(own["values_offset"] != values_ends - own["n_rows"]) or
            int(values_ends[-1]) != n_values):
        raise PairkitError("%s: the owned instances' n_runs, runs_offset and values_offset do not lay the %d runs "
                           "and %d values out one after another" % (path, runs.size, n_values))
    addr, count = runs["addr"], runs["count"]
    first = starts.astype(np.intp)
    after = np.ones(runs.size, dtype=bool)
    after[1:] = addr[1:] > addr[:-1]
    after[first] = True  # an instance's first run follows another instance's
    bad = (count == 0) | (addr % 8 != 0) | ~after
    if bad.any():
        j = int(np.argmax(bad))
        k = int(np.searchsorted(ends, j, side="right"))
        raise PairkitError("%s: instance %d: run %d (0x%08x, %d) is empty, unaligned or not after the run before it"
                           % (path, int(own["gid"][k]), j - int(starts[k]), int(addr[j]), int(count[j])))
    sums = np.add.reduceat(count, first, dtype=np.uint64)
    last = (ends - 1).astype(np.intp)
    wrong = (sums != own["n_rows"]) | (addr[first] != own["first_addr"]) | (addr[last] != own["last_addr"])
    if wrong.any():
        k = int(np.argmax(wrong))
        raise PairkitError("%s: instance %d: its runs (%d rows, 0x%08x .. 0x%08x) do not match its n_rows %d, "
                           "first_addr and last_addr" % (path, int(own["gid"][k]), int(sums[k]),
                                                         int(addr[first[k]]), int(addr[last[k]]),
                                                         int(own["n_rows"][k])))


def _check_values(path, inst, runs, values, chunk_start, n_entries):
    """The checks pk_memsort_read makes of the values (trace positions) with
    the rows: each a position of the trace, rising within a run; each owned
    instance's last run holding its last_include_total rows; its first and
    last rows in first_chunk and last_chunk, last_include of the last run's
    rows in last_chunk (with a chunk table); and, where the instance before
    it in its region is owned too, prev_value that one's last value and
    first_skip the earlier rows of first_addr in first_chunk. Runs are
    laid out as _check_runs checked."""
    own = inst[inst["owned"] != 0]
    if own.size == 0:
        return
    gid = own["gid"]
    count = runs["count"].astype(np.int64)
    if values.size and int(values.max()) >= n_entries:
        j = int(np.argmax(values >= n_entries))
        k = int(np.searchsorted(np.cumsum(own["n_rows"].astype(np.int64)), j, side="right"))
        raise PairkitError("%s: instance %d: value %d (%d) is past the trace's end"
                           % (path, int(gid[k]), j - int(own["values_offset"][k]), int(values[j])))
    block = 1 << 22  # runs at a time: the order within runs in bounded memory
    run_at = np.concatenate(([0], np.cumsum(count)))
    for r0 in range(0, count.size, block):
        r1 = min(r0 + block, count.size)
        v = values[int(run_at[r0]):int(run_at[r1])]
        rising = np.ones(v.size, dtype=bool)
        rising[1:] = v[1:] > v[:-1]
        rising[(run_at[r0:r1] - run_at[r0]).astype(np.intp)] = True  # a run's first value
        if not rising.all():
            j = int(run_at[r0]) + int(np.argmin(rising))
            k = int(np.searchsorted(np.cumsum(own["n_rows"].astype(np.int64)), j, side="right"))
            run = int(np.searchsorted(run_at, j, side="right")) - 1 - int(own["runs_offset"][k])
            raise PairkitError("%s: instance %d: value %d (%d, of run %d) is not after the value before it"
                               % (path, int(gid[k]), j - int(own["values_offset"][k]), int(values[j]), run))
    n_rows = own["n_rows"].astype(np.int64)
    first_v = own["values_offset"].astype(np.int64)
    last_v = first_v + n_rows - 1
    last_count = count[(own["runs_offset"] + own["n_runs"] - 1).astype(np.intp)]
    field = np.full(own.size, "", dtype=object)

    def mark(bad, name):
        field[(field == "") & bad] = name

    if chunk_start is not None:
        starts = chunk_start.astype(np.int64)

        def chunk_of(v):
            return np.searchsorted(starts, v, side="right") - 1

        mark(chunk_of(values[first_v].astype(np.int64)) != own["first_chunk"], "first_chunk")
        mark(chunk_of(values[last_v].astype(np.int64)) != own["last_chunk"], "last_chunk")
    mark(last_count != own["last_include_total"], "last_include_total")
    # each instance's last run: its values, the instance's index repeated
    lr_len = last_count
    lr_from = last_v + 1 - lr_len
    lr_inst = np.repeat(np.arange(own.size), lr_len)
    lr_idx = np.arange(int(lr_len.sum()), dtype=np.int64) - np.repeat(np.cumsum(lr_len) - lr_len, lr_len) + \
        np.repeat(lr_from, lr_len)
    lr_vals = values[lr_idx].astype(np.int64)
    if chunk_start is not None:
        in_last = lr_vals >= starts[own["last_chunk"].astype(np.intp)][lr_inst]
        mark(np.bincount(lr_inst, weights=in_last, minlength=own.size) != own["last_include"], "last_include")
    # the previous instance in the region, owned too: gid - 1 at index > 0
    follows = np.zeros(own.size, dtype=bool)
    follows[1:] = (gid[1:] == gid[:-1] + 1) & (own["index"][1:] > 0)
    prev_last = np.zeros(own.size, dtype=np.int64)
    prev_last[1:] = values[last_v[:-1]]
    mark(follows & (own["prev_value"] != prev_last), "prev_value")
    if chunk_start is not None:
        shares = np.zeros(own.size, dtype=bool)
        shares[1:] = follows[1:] & (own["first_addr"][1:] == own["last_addr"][:-1])
        # the previous instance's last-run rows in this one's first_chunk
        target = np.full(own.size, -1, dtype=np.int64)
        target[:-1] = np.where(shares[1:], own["first_chunk"][1:], -1)
        in_chunk = chunk_of(lr_vals) == target[lr_inst]
        skip = np.zeros(own.size, dtype=np.int64)
        skip[1:] = np.bincount(lr_inst, weights=in_chunk, minlength=own.size)[:-1].astype(np.int64)
        alone = np.zeros(own.size, dtype=bool)
        alone[1:] = (own["first_addr"][:-1] == own["last_addr"][:-1]) & (own["first_chunk"][:-1] ==
                                                                          own["first_chunk"][1:])
        skip[1:] += np.where(shares[1:] & alone[1:], own["first_skip"][:-1], 0)
        mark(follows & (own["first_skip"] != skip), "first_skip")
    bad = field != ""
    if bad.any():
        k = int(np.argmax(bad))
        note = {"prev_value": " (the previous instance's last value)",
                "first_skip": " and the previous instance's"}.get(field[k], "")
        raise PairkitError("%s: instance %d: field %s does not agree with its rows%s" % (path, int(gid[k]), field[k],
                                                                                        note))


def read_memsort(path):
    """A memsort.bin written by `pairkit memsort` (path: the file or its
    folder), checked against its documented layout (docs/memsort.md), as
    the dict memsort() returns: "instances", "runs", "values",
    "chunk_counts", "region_entries", "chunk_start", "workers", "worker",
    plus "n_entries" and "regions" (name, base, size, max_instances,
    instance_entries per region). The arrays are read-only views of the
    file's bytes, read once. A version 2 file's plans are also checked by
    the library's reader (pk_memsort_read: every instance against the
    regions, the header and the instance before it, the chunk counts
    against the rows), and the runs of every version as the library's
    reader checks them when it reads the rows (each instance's runs
    non-empty, aligned, in increasing address order, from its first_addr
    to its last_addr, adding up to its n_rows), and the values (trace
    positions within the trace, rising within a run) and the plan fields
    they fix (first_chunk, last_chunk, last_include, last_include_total,
    and prev_value and first_skip where the previous instance is owned
    too), as that reader checks them with the rows. Files of version 1 (no chunk table) read with
    "chunk_start" None."""
    path, data, section = _binary_file(path, "memsort.bin")
    head, at = section(0, 1, _FILE_HEADER, "header")
    h = head[0]
    if h["magic"] != b"PKMSORT1":
        raise PairkitError("%s: not a memsort.bin (it starts with %r, not b'PKMSORT1')" % (path, bytes(h["magic"])))
    if h["version"] not in (1, 2):
        raise PairkitError("%s: a memsort.bin of version %d; this module reads versions 1 and 2" % (path,
                                                                                                h["version"]))
    for field, want in (("header_bytes", 72), ("region_bytes", 48), ("instance_bytes", 96)):
        if h[field] != want:
            raise PairkitError("%s: header field %s is %d, expected %d" % (path, field, h[field], want))
    n_owned, n_chunks = int(h["n_owned"]), int(h["n_chunks"])
    regions, at = section(72, int(h["n_regions"]), _FILE_REGION, "regions")
    chunk_start = None
    if h["version"] >= 2:
        chunk_start, at = section(at, n_chunks + 1, np.dtype("<u8"), "chunk table")
        if chunk_start[0] != 0 or chunk_start[-1] != h["n_entries"] or np.any(np.diff(chunk_start.astype(np.int64)) < 0):
            raise PairkitError("%s: the chunk table does not run from 0 up to n_entries %d" % (path, h["n_entries"]))
    inst, at = section(at, int(h["n_instances"]), _FILE_INSTANCE, "instances")
    counts, at = section(at, n_owned * n_chunks, np.dtype("<u4"), "chunk counts")
    runs, at = section(at, int(h["n_runs"]), np.dtype([("addr", "<u4"), ("count", "<u4")]), "runs")
    values, at = section(at, int(h["n_values"]), np.dtype("<u4"), "values")
    if at != data.size:
        raise PairkitError("%s: %d bytes, the header's sections take %d" % (path, data.size, at))
    if h["version"] >= 2:
        _check_plans(path)
    _check_runs(path, inst, runs, values.size)
    _check_values(path, inst, runs, values, chunk_start, int(h["n_entries"]))
    instances = np.zeros(inst.size, _INSTANCE)  # the fields memsort() gives, counts_offset the row of chunk_counts
    for name in _INSTANCE.names:
        if name != "counts_offset":
            instances[name] = inst[name]
    owned = instances["owned"] != 0
    if int(owned.sum()) != n_owned:
        raise PairkitError("%s: %d instances marked owned, the header says %d" % (path, int(owned.sum()), n_owned))
    instances["counts_offset"][owned] = np.arange(n_owned, dtype=np.uint64)
    return {"instances": instances, "runs": runs, "values": values, "chunk_counts": counts.reshape(n_owned, n_chunks),
            "region_entries": regions["entries"].astype(np.uint64), "chunk_start": chunk_start,
            "workers": int(h["n_workers"]),
            "worker": int(h["worker"]), "n_entries": int(h["n_entries"]),
            "regions": [{"name": r["name"].rstrip(b"\0").decode("ascii", "replace"), "base": int(r["base"]),
                         "size": int(r["size"]), "max_instances": int(r["max_instances"]),
                         "instance_entries": int(r["instance_entries"])} for r in regions]}


def memsort_rows(result, gid):
    """An owned instance's rows: (addresses, values), two uint32 arrays in
    stable address order, its runs expanded."""
    inst = result["instances"]
    if inst.size == 0:
        raise PairkitError("gid %r: the trace has no instances" % (_plain(gid),))
    gid = _count(gid, "gid", 0, inst.size - 1)
    i = inst[gid]
    if not i["owned"]:
        raise PairkitError("instance %d is not owned by worker %d of %d" % (gid, result["worker"],
                                                                           result["workers"]))
    runs = result["runs"][i["runs_offset"]:i["runs_offset"] + i["n_runs"]]
    values = result["values"][i["values_offset"]:i["values_offset"] + i["n_rows"]]
    return np.repeat(runs["addr"], runs["count"]), values


def memsort_fill(result, chunks, gids=None, nthreads=0):
    """Instances filled from the chunk files a worker holds, by their plans
    alone, as a prover worker that did not sort the whole trace fills them
    (pk_memsort_fill_from_chunks; docs/memsort.md, "Instances, workers,
    plans"). result: what memsort() or read_memsort() returns (it holds
    every instance's plan, owned or not). chunks: {chunk number:
    (trace position of its first entry, its addresses)}, or {chunk
    number: addresses} when the result has a chunk table ("chunk_start",
    as memsort() and version 2 files give). gids: the instances to fill
    (default: the owned ones).

    Returns {gid: (addresses, values, chunk_rows)}: the rows those chunks
    hold of the instance in stable address order (all its rows when every
    chunk it draws on is given), and the rows each given chunk gave, in
    increasing chunk number."""
    lib = _load()
    inst = result["instances"]
    if gids is None:
        gids = np.flatnonzero(inst["owned"] != 0)
    gids = [_count(g, "gid", 0, max(inst.size - 1, 0)) for g in np.atleast_1d(np.asarray(gids)).tolist()]
    if inst.size == 0 and gids:
        raise PairkitError("the result has no instances")
    plans = np.ascontiguousarray(inst[gids]).astype(_INSTANCE)
    if not isinstance(chunks, dict):
        raise PairkitError("chunks must be a dict {chunk number: (first position, addresses)}")
    keep, views = [], []
    for index in sorted(chunks):
        c = _count(index, "chunk number", 0, (1 << 32) - 1)
        starts, given = result.get("chunk_start"), chunks[index]
        # (position, addresses) as a tuple, or as a list of two whose
        # second is an array; else the addresses alone
        pair = isinstance(given, tuple) or (isinstance(given, list) and len(given) == 2 and np.ndim(given[1]) == 1)
        if pair or starts is None:
            try:
                first, addr = chunks[index]
            except (TypeError, ValueError):
                raise PairkitError("chunks[%r] must be (first position, addresses)" % (index,)) from None
        else:  # the addresses alone: the position from the chunk table (checked below with the length)
            first, addr = (int(starts[c]) if c < len(starts) - 1 else 0), chunks[index]
        a = _addresses(addr)
        first = _count(first, "chunks[%d] first position" % c, 0, (1 << 32) - 1)
        if starts is not None:  # the result's chunk table says where the chunk lies, and how long it is
            if c >= len(starts) - 1:
                raise PairkitError("chunks[%d]: the trace has %d chunks" % (c, len(starts) - 1))
            if first != int(starts[c]) or a.size != int(starts[c + 1]) - int(starts[c]):
                raise PairkitError("chunks[%d]: (position %d, %d addresses), the chunk table gives chunk %d position "
                                   "%d and %d entries" % (c, first, a.size, c, int(starts[c]),
                                                          int(starts[c + 1]) - int(starts[c])))
        keep.append(a)
        views.append(_Chunk(c, first, a.ctypes.data_as(ctypes.POINTER(_U32)), a.size))
    chunk_arr = (_Chunk * max(len(views), 1))(*views)
    base = plans.ctypes.data
    pairs = [np.zeros(2 * int(n), np.uint32) for n in plans["n_rows"].tolist()]
    rows = [np.zeros(max(len(views), 1), np.uint32) for _ in gids]
    fills = (_Fill * max(len(gids), 1))(*[
        _Fill(ctypes.cast(base + k * _INSTANCE.itemsize, ctypes.POINTER(_Instance)),
              pairs[k].ctypes.data_as(ctypes.POINTER(_U32)), pairs[k].size // 2, 0,
              rows[k].ctypes.data_as(ctypes.POINTER(_U32))) for k in range(len(gids))])
    ctx = new_context(nthreads)
    with interruptible(ctx):
        st = lib.pk_memsort_fill_from_chunks(ctypes.byref(ctx), chunk_arr, len(views), fills, len(gids))
    try:
        _check(st, ctx)
    except PairkitError as e:  # the library names chunk files; here they are entries of chunks
        raise PairkitError(_CHUNK_ENTRY.sub(lambda m: "chunks[%d][%d]" % (int(m.group(1)), int(m.group(2))),
                                            str(e))) from None
    out = {}
    for k, g in enumerate(gids):
        n = int(fills[k].n_rows)
        out[g] = (pairs[k][0:2 * n:2].copy(), pairs[k][1:2 * n:2].copy(), rows[k][:len(views)].copy())
    return out


_FILL_HEADER = np.dtype([("magic", "S8"), ("version", "<u4"), ("header_bytes", "<u4"), ("n_entries", "<u8"),
                         ("n_chunks", "<u4"), ("n_given", "<u4"), ("n_filled", "<u4"), ("instance_bytes", "<u4"),
                         ("n_pairs", "<u8")])
_FILL_INSTANCE = np.dtype([("gid", "<u4"), ("complete", "<u4"), ("n_rows", "<u8"), ("pairs_offset", "<u8")])


def read_memsort_fill(path):
    """A fill.bin written by `pairkit memsort-fill` (path: the file or its
    folder; layout in docs/memsort.md) as a dict: "rows", {gid:
    (addresses, values, chunk_rows)} as memsort_fill() returns it;
    "chunks", the chunk numbers that were given, in the order of
    chunk_rows; "complete", {gid: whether every row of the instance is
    there}."""
    path, data, section = _binary_file(path, "fill.bin")
    head, at = section(0, 1, _FILL_HEADER, "header")
    h = head[0]
    if h["magic"] != b"PKMFILL1":
        raise PairkitError("%s: not a fill.bin (it starts with %r, not b'PKMFILL1')" % (path, bytes(h["magic"])))
    if h["version"] != 1 or h["header_bytes"] != 48 or h["instance_bytes"] != 24:
        raise PairkitError("%s: a fill.bin of version %d (header %d, instance %d bytes); this module reads "
                           "version 1 (48, 24)" % (path, h["version"], h["header_bytes"], h["instance_bytes"]))
    n_given, n_filled = int(h["n_given"]), int(h["n_filled"])
    given, at = section(at, n_given, np.dtype("<u4"), "given chunks")
    inst, at = section(at, n_filled, _FILL_INSTANCE, "instances")
    rows, at = section(at, n_filled * n_given, np.dtype("<u4"), "chunk rows")
    pairs, at = section(at, int(h["n_pairs"]), np.dtype([("addr", "<u4"), ("value", "<u4")]), "pairs")
    if at != data.size:
        raise PairkitError("%s: %d bytes, the header's sections take %d" % (path, data.size, at))
    rows = rows.reshape(n_filled, n_given)
    rows_of, complete = {}, {}
    for k, i in enumerate(inst):
        lo, n = int(i["pairs_offset"]), int(i["n_rows"])
        if lo + n > pairs.size:
            raise PairkitError("%s: instance %d's rows lie past the pairs" % (path, int(i["gid"])))
        p = pairs[lo:lo + n]
        rows_of[int(i["gid"])] = (p["addr"].copy(), p["value"].copy(), rows[k].copy())
        complete[int(i["gid"])] = bool(i["complete"])
    return {"rows": rows_of, "chunks": given.copy(), "complete": complete}
