"""Loading libpairkit.so, and what every workload's binding shares."""
import contextlib
import ctypes
import ctypes.util
import os
import signal
import sys
import threading

import numpy as np


class PairkitError(ValueError):
    """A pairkit call failed; the message names the argument or file."""


class _Context(ctypes.Structure):  # pairkit.h
    _fields_ = [("message", ctypes.c_char * 512), ("progress", ctypes.c_void_p), ("progress_user", ctypes.c_void_p),
                ("n_threads", ctypes.c_int), ("cuda_device", ctypes.c_int)]


_BACKENDS = {"auto": 0, "cpu": 1, "cuda": 2}

_lib = None


def library_path():
    """Where libpairkit.so is taken from."""
    env = os.environ.get("PAIRKIT_LIB")
    if env:
        return env
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(os.path.dirname(here))
    cand = os.path.join(root, "build", "libpairkit.so")
    if os.path.exists(cand):
        return cand
    try:
        from . import _installed  # written by cmake --install only
    except ImportError:
        _installed = None
    if _installed is not None:
        cand = os.path.normpath(os.path.join(here, _installed.LIBDIR, "libpairkit.so"))
        if os.path.exists(cand):
            return cand
    found = ctypes.util.find_library("pairkit")
    if found:
        return found
    raise PairkitError("libpairkit.so not found: build the C library (cmake --build build) or set PAIRKIT_LIB")


_declared = set()


def load(declare=None):
    """The library (loaded once), with declare(lib) run once to give a
    binding's functions their argument and result types."""
    global _lib
    if _lib is None:
        _lib = _open_library()
    if declare is not None and declare not in _declared:
        declare(_lib)
        _declared.add(declare)
    return _lib


def _open_library():
    path = library_path()
    try:
        lib = ctypes.CDLL(path)
    except OSError as e:
        raise PairkitError("%s cannot be loaded (%s): rebuild it, or set PAIRKIT_LIB" % (path, e)) from None
    lib.pk_context_init.argtypes = [ctypes.POINTER(_Context)]
    return lib


def new_context(nthreads):
    ctx = _Context()
    load().pk_context_init(ctypes.byref(ctx))
    ctx.n_threads = _count(0 if nthreads is None else nthreads, "nthreads", 0, 1024)
    return ctx


def _is_key(x, table):
    """Whether x names an entry of table (a list, an array or None is not a
    name: no TypeError from hashing it)."""
    return isinstance(x, str) and x in table


def backend_code(backend):
    if not _is_key(backend, _BACKENDS):
        raise PairkitError("backend must be auto, cpu or cuda (got %r)" % (backend,))
    return _BACKENDS[backend]


_CANCELLED = 7  # PK_ERR_CANCELLED
_PROGRESS_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_double)


@contextlib.contextmanager
def interruptible(ctx):
    """Ctrl-C stops a long call within a fraction of a second, as on the
    command line: while the block runs, SIGINT only marks a flag, which
    the library's progress callback (called on this thread every 50 ms)
    turns into a cancellation; the block then ends in KeyboardInterrupt.
    An exception that another signal's handler raises meanwhile (a
    SIGALRM timeout, say) runs inside that callback, where ctypes can only
    print it: it is kept, the call is cancelled the same way, and the block
    ends in that exception instead. Only on the main thread with Python's
    own SIGINT handler in place (a handler of the program's own is left to
    act); elsewhere the block runs as it is."""
    old = signal.getsignal(signal.SIGINT)
    if threading.current_thread() is not threading.main_thread() or old is not signal.default_int_handler:
        yield
        return
    hit, raised = [], []

    def on_sigint(signum, frame):
        hit.append(signum)

    def look(user, fraction):
        return 1 if hit or raised else 0

    old_hook = sys.unraisablehook

    def keep_ours(unraisable):
        # what ctypes could not raise from the callback: a signal handler's exception
        if unraisable.object is look and unraisable.exc_value is not None:
            raised.append(unraisable.exc_value)
        else:
            old_hook(unraisable)

    callback = _PROGRESS_FN(look)
    ctx.progress = ctypes.cast(callback, ctypes.c_void_p).value
    signal.signal(signal.SIGINT, on_sigint)
    sys.unraisablehook = keep_ours
    try:
        yield
    except KeyboardInterrupt:
        if raised:
            raise raised[0] from None
        raise
    finally:
        sys.unraisablehook = old_hook
        signal.signal(signal.SIGINT, old)
        ctx.progress = None
    if raised:  # raised after the last look: the result is dropped all the same
        raise raised[0]
    if hit:
        raise KeyboardInterrupt


def _finite(a, name):
    """a, when every value is finite; else an error naming the first that is not."""
    bad = np.flatnonzero(~np.isfinite(a))
    if bad.size:
        raise PairkitError("%s[%d] is %r: every value must be finite" % (name, bad[0], _plain(a[bad[0]])))
    return a


def _not_masked(raw, name):
    if isinstance(raw, np.ma.MaskedArray):
        raise PairkitError("%s is a masked array: pass the entries to use (a[~a.mask]) or fill the masked ones"
                           % name)


def _ptr(a):
    return a.ctypes.data_as(ctypes.POINTER(ctypes.c_double)) if a is not None else None


def _one_dimensional(x, name, what="numbers"):
    """x as a numpy array, refused when masked, ragged or not one-dimensional
    (a 2-D array is refused rather than flattened)."""
    _not_masked(x, name)
    try:
        raw = np.asarray(x)
    except Exception as e:  # ragged lists and the like
        raise PairkitError("%s: not an array of %s (%s)" % (name, what, e)) from None
    if raw.ndim != 1:
        raise PairkitError("%s must be one-dimensional, got shape %s" % (name, raw.shape))
    return raw


def _array(x, name, n=None):
    """A 1-D float64 copy-if-needed of x: real numbers only."""
    raw = _one_dimensional(x, name)
    if raw.dtype.kind not in "iuf":  # booleans too are refused: a mask given for the values
        raise PairkitError("%s must hold real numbers, got dtype %s" % (name, raw.dtype))
    a = np.ascontiguousarray(raw, dtype=np.float64)
    if n is not None and a.size != n:
        raise PairkitError("%s has %d values, expected %d" % (name, a.size, n))
    return a


def _fspath(path):
    """A file name as the C library takes it: bytes, with no NUL inside (C
    would end the name there and use another file)."""
    b = os.fsencode(path)
    if b"\0" in b:
        raise ValueError("embedded null byte in a file name: %r" % (path,))
    return b


def _plain(x):
    """x for a message: a numpy scalar as the Python number it holds (numpy 2
    writes repr(np.float64(2.0)) as 'np.float64(2.0)')."""
    return x.item() if isinstance(x, np.generic) else x


def _count(x, name, lo, hi):
    """A whole number in [lo, hi], refused rather than truncated or wrapped."""
    if isinstance(x, bool) or not isinstance(x, (int, np.integer)):
        if isinstance(x, (float, np.floating)) and float(x).is_integer():
            x = int(x)
        else:
            raise PairkitError("%s must be a whole number, got %r" % (name, _plain(x)))
    if not lo <= int(x) <= hi:
        raise PairkitError("%s must be in %d .. %d, got %d" % (name, lo, hi, int(x)))
    return int(x)


def _check(st, ctx):
    if st == _CANCELLED:
        raise KeyboardInterrupt
    if st != 0:
        raise PairkitError(ctx.message.decode("utf-8", "replace") or "pairkit error %d" % st)

