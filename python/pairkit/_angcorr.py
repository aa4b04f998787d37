"""Angular pair counts and w(theta): the angcorr binding."""
import ctypes
import os
import time
import warnings

import numpy as np

from ._core import (PairkitError, _Context, _array, _check, _count, _finite, _is_key, _plain, _ptr, backend_code,
                    interruptible, load, new_context)


# ---- the C structures (angcorr.h) --------------------------------------------

class _Catalog(ctypes.Structure):
    _fields_ = [("n", ctypes.c_size_t), ("ra", ctypes.POINTER(ctypes.c_double)),
                ("dec", ctypes.POINTER(ctypes.c_double))]


class _Bins(ctypes.Structure):
    _fields_ = [("kind", ctypes.c_int), ("n_bins", ctypes.c_size_t), ("theta_min", ctypes.c_double),
                ("width", ctypes.c_double), ("edges", ctypes.POINTER(ctypes.c_double))]


class _Options(ctypes.Structure):
    _fields_ = [("backend", ctypes.c_int), ("kernel", ctypes.c_int)]


class _Features(ctypes.Structure):
    _fields_ = [("weights_a", ctypes.POINTER(ctypes.c_double)), ("weights_b", ctypes.POINTER(ctypes.c_double)),
                ("mean_theta", ctypes.c_int), ("prune", ctypes.c_int)]


class _Stats(ctypes.Structure):
    _fields_ = [("pairs_total", ctypes.c_uint64), ("pairs_in_range", ctypes.c_uint64),
                ("pairs_visited", ctypes.c_uint64), ("pairs_fp64", ctypes.c_uint64), ("seconds", ctypes.c_double),
                ("kernel_ms", ctypes.c_double), ("kernel", ctypes.c_int),
                ("blocks_per_sm", ctypes.c_int)]


class _Result(ctypes.Structure):
    _fields_ = [("n_bins", ctypes.c_size_t), ("n_data", ctypes.c_uint64), ("n_random", ctypes.c_uint64),
                ("dd", ctypes.POINTER(ctypes.c_uint64)), ("dr", ctypes.POINTER(ctypes.c_uint64)),
                ("rr", ctypes.POINTER(ctypes.c_uint64)), ("omega", ctypes.POINTER(ctypes.c_double)),
                ("estimator", ctypes.c_int), ("stats_dd", _Stats), ("stats_dr", _Stats), ("stats_rr", _Stats)]


class _RunOptions(ctypes.Structure):
    _fields_ = [("weights_data", ctypes.POINTER(ctypes.c_double)), ("weights_random", ctypes.POINTER(ctypes.c_double)),
                ("mean_theta", ctypes.c_int), ("jackknife", ctypes.c_int), ("prune", ctypes.c_int)]


class _Extras(ctypes.Structure):
    _fields_ = [("n_bins", ctypes.c_size_t), ("weighted", ctypes.c_int), ("sum_w_data", ctypes.c_double),
                ("sum_w_random", ctypes.c_double)] + \
               [(name, ctypes.POINTER(ctypes.c_double)) for name in
                ("dd_w", "dr_w", "rr_w", "theta_mean_dd", "theta_mean_dr", "theta_mean_rr")] + \
               [("n_patches", ctypes.c_size_t)] + \
               [(name, ctypes.POINTER(ctypes.c_double)) for name in ("omega_jk", "omega_cov", "omega_err")]


class _RRCells(ctypes.Structure):
    _fields_ = [("n_patches", ctypes.c_int), ("n_bins", ctypes.c_size_t),
                ("counts", ctypes.POINTER(ctypes.c_uint64)), ("weighted", ctypes.POINTER(ctypes.c_double)),
                ("theta_sum", ctypes.POINTER(ctypes.c_double))]


_ESTIMATORS = {"ls": 0, "landy-szalay": 0, "natural": 1, "peebles-hauser": 1, "hamilton": 2, "dp": 3,
               "davis-peebles": 3}
_UNITS = {"arcmin": 0, "deg": 1, "rad": 2, "arcsec": 3}  # pk_units
_TO_RAD = {"deg": np.pi / 180.0, "arcmin": np.pi / 10800.0, "arcsec": np.pi / 648000.0, "rad": 1.0}
_PRUNE = {"auto": 0, "off": 1, "on": 2}


def _declare(lib):
    """The angcorr functions' argument and result types."""
    P = ctypes.POINTER
    lib.pk_catalog_from_arrays.argtypes = [P(_Context), ctypes.c_size_t, P(ctypes.c_double), P(ctypes.c_double),
                                           ctypes.c_int, ctypes.c_char_p, P(_Catalog)]
    lib.pk_catalog_free.argtypes = [P(_Catalog)]
    lib.pk_bins_from_edges.argtypes = [P(_Context), P(ctypes.c_double), ctypes.c_size_t, P(_Bins)]
    lib.pk_bins_free.argtypes = [P(_Bins)]
    lib.pk_angcorr_count_ex.argtypes = [P(_Context), P(_Options), P(_Catalog), P(_Catalog), P(_Bins), P(_Features),
                                        P(ctypes.c_uint64), P(ctypes.c_double), P(ctypes.c_double), P(_Stats)]
    lib.pk_angcorr_run_ex.argtypes = [P(_Context), P(_Options), P(_Catalog), P(_Catalog), P(_Bins), ctypes.c_int,
                                      P(_RunOptions), P(_Result), P(_Extras)]
    lib.pk_angcorr_run_ex_rr.argtypes = [P(_Context), P(_Options), P(_Catalog), P(_Catalog), P(_Bins), ctypes.c_int,
                                         P(_RunOptions), P(_RRCells), P(_RRCells), P(_Result), P(_Extras)]
    lib.pk_angcorr_rr_cells_free.argtypes = [P(_RRCells)]
    lib.pk_angcorr_run_part_rr.argtypes = [P(_Context), P(_Options), ctypes.c_int, ctypes.c_int, P(_Catalog),
                                           P(_Catalog), P(_Bins), ctypes.c_int, P(ctypes.c_uint64), P(_Result)]
    lib.pk_angcorr_result_free.argtypes = [P(_Result)]
    lib.pk_angcorr_extras_free.argtypes = [P(_Extras)]
    for name in ("pk_catalog_from_arrays", "pk_bins_from_edges", "pk_angcorr_count_ex", "pk_angcorr_run_ex",
                 "pk_angcorr_run_ex_rr", "pk_angcorr_run_part_rr"):
        getattr(lib, name).restype = ctypes.c_int


def _load():
    return load(_declare)


# Corrfunc's tuning arguments, accepted and ignored (pairkit needs none);
# any other unknown keyword is a TypeError, as a misspelt one would be.
_CORRFUNC_TUNING = {"isa", "verbose", "c_api_timer", "fast_acos", "link_in_dec", "link_in_ra", "ra_refine_factor",
                    "dec_refine_factor", "max_cells_per_dim", "copy_particles", "enable_min_sep_opt",
                    "xbin_refine_factor", "ybin_refine_factor", "zbin_refine_factor"}



def _edges_deg(binfile, name="binfile"):
    if isinstance(binfile, (str, bytes, os.PathLike)):
        binfile = os.fsdecode(binfile)  # np.loadtxt reads a bytes name as the file's text
        if "\0" in binfile:
            raise ValueError("embedded null byte in a file name: %r" % (binfile,))
        if not os.path.isfile(binfile):
            raise PairkitError("%s %s: %s" % (name, os.fsdecode(binfile), "is a directory" if os.path.isdir(binfile)
                                                else "no such file"))
        try:
            rows = np.loadtxt(binfile, ndmin=2, encoding="utf-8-sig")  # a byte order mark skipped
            if not np.all(np.isfinite(rows)):
                raise ValueError("a value is not finite (%r)" % _plain(rows[~np.isfinite(rows)][0]))
        except OSError as e:
            raise PairkitError("%s %s: %s" % (name, os.fsdecode(binfile), e.strerror or e)) from None
        except ValueError as e:
            raise PairkitError("%s %s: %s" % (name, os.fsdecode(binfile), e)) from None
        if rows.shape[0] == 1 or rows.shape[1] == 1:
            rows = rows.reshape(-1, 1)  # edges on one line, or one a line (as the command line's --edges)
        elif rows.shape[1] > 2:
            raise PairkitError("%s %s: %d columns on %d lines: expected rows 'theta_lo theta_hi' (Corrfunc's), "
                               "or the edges one a line or all on one line" % (name, os.fsdecode(binfile), rows.shape[1],
                                                                               rows.shape[0]))
        if rows.shape[1] == 2:
            # Corrfunc's rows "lo hi" of contiguous bins: each row starts where the last ended
            gap = np.nonzero(rows[1:, 0] != rows[:-1, 1])[0]
            if gap.size:
                k = int(gap[0])
                raise PairkitError("%s %s: row %d starts at %r, row %d ended at %r: bins must be contiguous" %
                                   (name, os.fsdecode(binfile), k + 2, _plain(rows[k + 1, 0]), k + 1, _plain(rows[k, 1])))
            edges = np.concatenate([rows[:, 0], rows[-1:, 1]])
        else:
            edges = rows[:, 0]
    else:
        edges = _array(binfile, name)
    if edges.size < 2:
        raise PairkitError("%s: at least 2 edges are needed" % name)
    return np.ascontiguousarray(edges, dtype=np.float64)


class _Session:
    """A context, catalogs and bins that are freed together."""

    def __init__(self, nthreads, backend):
        self.lib = _load()
        self.ctx = new_context(nthreads)
        self.opts = _Options(backend_code(backend), 0)
        self.cats, self.bins = [], []

    def catalog(self, ra, dec, units, field):
        ra = _array(ra, field + " RA")
        dec = _array(dec, field + " DEC", ra.size)
        cat = _Catalog()
        _check(self.lib.pk_catalog_from_arrays(ctypes.byref(self.ctx), ra.size, _ptr(ra), _ptr(dec), _UNITS[units],
                                               field.encode(), ctypes.byref(cat)), self.ctx)
        self.cats.append(cat)
        return cat

    def bins_from(self, edges_deg, units):
        scale = _TO_RAD[units]
        edges = np.ascontiguousarray(edges_deg * scale)
        bins = _Bins()
        _check(self.lib.pk_bins_from_edges(ctypes.byref(self.ctx), _ptr(edges), edges.size, ctypes.byref(bins)),
               self.ctx)
        self.bins.append(bins)
        return bins

    def close(self):
        for c in self.cats:
            self.lib.pk_catalog_free(ctypes.byref(c))
        for b in self.bins:
            self.lib.pk_bins_free(ctypes.byref(b))
        self.cats, self.bins = [], []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _check_prune(prune):
    if not _is_key(prune, _PRUNE):
        raise PairkitError("prune must be auto, on or off (got %r)" % (prune,))


def _corrfunc_weights(w, n, name):
    """Weights as Corrfunc takes them: a scalar (every object's), shape
    (N,), or shape (1, N) (one weight per object for pair_product)."""
    if isinstance(w, np.ma.MaskedArray):
        return w  # refused by _array, naming it
    a = np.asarray(w)
    if a.ndim == 0 and a.dtype.kind in "iuf":
        return np.full(n, float(a))
    if a.ndim == 2 and a.shape[0] == 1:
        return a[0]
    if a.ndim == 2:
        raise PairkitError("%s has shape %s: weight_type='pair_product' takes one weight per object, shape "
                           "(%d,) or (1, %d)" % (name, a.shape, n, n))
    return w


def DDtheta_mocks(autocorr, nthreads, binfile, RA1, DEC1, weights1=None, RA2=None, DEC2=None, weights2=None,
                  link_in_dec=True, link_in_ra=True, verbose=False, output_thetaavg=False, fast_acos=False,
                  ra_refine_factor=2, dec_refine_factor=2, max_cells_per_dim=100, c_api_timer=False, isa="fastest",
                  weight_type=None, *, units="deg", backend="auto", prune="auto", **ignored):
    """Pair counts in bins of angular separation, shaped like Corrfunc's
    DDtheta_mocks.

    autocorr: 1 counts the pairs of (RA1, DEC1) with itself (every ordered
    pair, both orders, and the self-pairs, whose separation comes out as 0
    or, from the float64 rounding of the dot product, up to ~3e-6 degree:
    they fall in the first bin when it starts at 0 and reaches past that); 0
    counts (RA1, DEC1) against (RA2, DEC2). binfile: a file of contiguous
    rows "theta_lo theta_hi" (or one edge per row), or a 1-D array of edges.
    Positions and bins are in `units`: "deg" (the default, as Corrfunc),
    "arcmin", "arcsec" or "rad". weights1/weights2: per-object weights, used as in
    Corrfunc only with weight_type="pair_product" (a pair weighs w1 * w2);
    with weight_type=None, Corrfunc's default, they are not used (a
    warning says so). A weight is a scalar (every object's), an array of
    one per object, or, as Corrfunc takes it, of shape (1, N).
    output_thetaavg: the mean separation of the pairs of each bin,
    weighted by the pair weights when there are weights (Corrfunc's is
    unweighted). The arguments up to weight_type are Corrfunc's, in its
    order, so positional calls mean the same; its tuning arguments
    (link_in_dec, link_in_ra, verbose, fast_acos, the refine factors,
    max_cells_per_dim, isa, and copy_particles, enable_min_sep_opt by
    keyword) are accepted and ignored: the counts are exact without them.
    Any other keyword is a TypeError. Keyword only: units, backend
    ("auto", "cpu" or "cuda") and prune ("auto", "on" or "off": skip cell
    pairs beyond the last edge). Coordinates must be one-dimensional real
    numbers.

    Returns a numpy structured array with fields thetamin, thetamax,
    thetaavg (in `units`, 0 unless asked), npairs (exact counts) and
    weightavg (mean pair weight, 0 when unweighted); with c_api_timer=True,
    as Corrfunc, the pair (results, api_time), api_time the seconds of the
    count itself.
    """
    unknown = sorted(set(ignored) - _CORRFUNC_TUNING)
    if unknown:
        raise TypeError("DDtheta_mocks() got unexpected keyword argument(s): %s" % ", ".join(unknown))
    if isinstance(autocorr, str) or np.ndim(autocorr) != 0 or autocorr not in (0, 1):
        raise PairkitError("autocorr must be 1 (a catalog with itself) or 0 (RA1/DEC1 against RA2/DEC2), got %r"
                           % (_plain(autocorr),))
    if weight_type not in (None, "pair_product"):
        raise PairkitError("weight_type must be 'pair_product' or None (got %r)" % (weight_type,))
    if weight_type is None and (weights1 is not None or weights2 is not None):
        warnings.warn("DDtheta_mocks: weights given with weight_type=None are not used, as in Corrfunc; "
                      "pass weight_type='pair_product' to weight each pair by w1 * w2", stacklevel=2)
        weights1 = weights2 = None
    if not _is_key(units, _UNITS):
        raise PairkitError("units must be deg, arcmin, arcsec or rad (got %r)" % (units,))
    _check_prune(prune)
    edges = _edges_deg(binfile)
    with _Session(nthreads, backend) as s:
        a = s.catalog(RA1, DEC1, units, "RA1/DEC1")
        w1 = _finite(_array(_corrfunc_weights(weights1, a.n, "weights1"), "weights1", a.n), "weights1") \
            if weights1 is not None else None
        b, w2 = None, None
        if not autocorr:
            if RA2 is None or DEC2 is None:
                raise PairkitError("autocorr=0 needs RA2 and DEC2")
            b = s.catalog(RA2, DEC2, units, "RA2/DEC2")
            w2 = _finite(_array(_corrfunc_weights(weights2, b.n, "weights2"), "weights2", b.n), "weights2") \
                if weights2 is not None else None
        if (w1 is None) != (w2 is None) and not autocorr:
            # one side weighted: the other weighs 1
            if w1 is None:
                w1 = np.ones(a.n)
            else:
                w2 = np.ones(b.n)
        bins = s.bins_from(edges, units)
        n = bins.n_bins
        counts = np.zeros(n, dtype=np.uint64)
        wsum = np.zeros(n)
        tsum = np.zeros(n)
        feats = _Features(_ptr(w1), _ptr(w2), 1 if output_thetaavg else 0, _PRUNE[prune])
        stats = _Stats()
        t0 = time.perf_counter()
        with interruptible(s.ctx):
            st = s.lib.pk_angcorr_count_ex(ctypes.byref(s.ctx), ctypes.byref(s.opts), ctypes.byref(a),
                                           ctypes.byref(b) if b is not None else None, ctypes.byref(bins),
                                           ctypes.byref(feats), counts.ctypes.data_as(ctypes.POINTER(ctypes.c_uint64)),
                                           _ptr(wsum), _ptr(tsum) if output_thetaavg else None, ctypes.byref(stats))
        api_time = time.perf_counter() - t0
        try:
            _check(st, s.ctx)
        except PairkitError as e:  # the library's names for the two catalogs' weights, as given here
            raise PairkitError(str(e).replace("weights_a", "weights1").replace("weights_b", "weights2")) from None
    out = np.zeros(n, dtype=[("thetamin", "f8"), ("thetamax", "f8"), ("thetaavg", "f8"), ("npairs", "u8"),
                             ("weightavg", "f8")])
    out["thetamin"] = edges[:-1]
    out["thetamax"] = edges[1:]
    out["npairs"] = counts
    nonzero = wsum != 0
    if output_thetaavg:
        scale = 1.0 / _TO_RAD[units]
        out["thetaavg"][nonzero] = tsum[nonzero] / wsum[nonzero] * scale
    if w1 is not None or w2 is not None:
        has = counts > 0
        out["weightavg"][has] = wsum[has] / counts[has]
    return (out, api_time) if c_api_timer else out


def _jackknife_count(k):
    """jackknife=K: 0 (none) or 2 .. 10000 patches, as the command line."""
    k = _count(k, "jackknife", 0, 10000)
    if k == 1:
        raise PairkitError("jackknife: 1 patch leaves nothing out; give 0 (none) or 2 .. 10000 patches")
    return k


def w_theta(ra, dec, rand_ra, rand_dec, bins, weights=None, rand_weights=None, estimator="ls", jackknife=0,
            mean_theta=False, nthreads=0, units="deg", backend="auto", prune="auto", rr=None):
    """w(theta) of a data catalog against a random one: DD, DR, RR, the
    estimator ("ls", "natural", "hamilton", "dp") on counts normalised by
    their totals (weight totals when weighted), and with jackknife=K the
    leave-one-patch-out errors over K sky patches made from the randoms.

    rr: RR of an earlier result for the same random catalog and bins, used
    instead of counting RR again; the caller vouches that they match. For a
    plain run, or one whose only features are data weights or prune, its
    "rr" (as on the command line); with rand_weights, jackknife or
    mean_theta its "rr_cells", from a run with the same rand_weights,
    jackknife and mean_theta (weights given on one side only count as ones
    on the other).

    Returns a dict: theta_lo, theta_hi (degrees or `units`), omega, dd, dr,
    rr (exact counts), and when asked dd_w, dr_w, rr_w (weighted counts),
    theta_mean_dd (mean separations), omega_err, cov (K-patch covariance),
    omega_jk (K leave-one-out values); and, where RR was counted (not
    given as rr), rr_cells: RR per patch pair, a dict of counts, weighted
    and (with mean_theta) theta_sum arrays of shape (K, K, bins), K = 1
    without jackknife, for later runs with weights, jackknife, mean_theta
    or prune.
    """
    if isinstance(estimator, str):
        estimator = estimator.lower()  # Corrfunc's convert_3d_counts_to_cf says 'LS'
    if not _is_key(estimator, _ESTIMATORS):
        raise PairkitError("estimator must be ls, natural, hamilton or dp (got %r)" % (estimator,))
    if not isinstance(mean_theta, (bool, np.bool_)) and mean_theta not in (0, 1):
        raise PairkitError("mean_theta must be True or False (got %r)" % (_plain(mean_theta),))
    if not _is_key(units, _UNITS):
        raise PairkitError("units must be deg, arcmin, arcsec or rad (got %r)" % (units,))
    _check_prune(prune)
    edges = _edges_deg(bins, "bins")
    features = (weights is not None or rand_weights is not None or jackknife or mean_theta or prune != "auto")
    if rr is not None and features and not isinstance(rr, dict) and rand_weights is None and not jackknife \
            and not mean_theta:
        # data weights alone, or prune: RR is the plain counts (as on the
        # command line), given as the one cell they are
        if isinstance(rr, np.ma.MaskedArray):
            raise PairkitError("rr: a masked array; give the counts of every bin")
        plain = np.asarray(rr)
        if plain.ndim == 1 and plain.dtype.kind == "f":  # whole counts held as floats, as without weights
            # (at most 2^53: beyond it a float holds no exact count, and 2^64 would wrap to 0)
            bad = np.flatnonzero(~np.isfinite(plain) | (plain != np.floor(plain)) | (plain < 0) | (plain > 2.0 ** 53))
            if bad.size:
                raise PairkitError("rr must hold whole counts >= 0; rr[%d] is %r" % (bad[0], _plain(plain[bad[0]])))
            plain = plain.astype(np.uint64)
        if plain.ndim == 1 and plain.dtype.kind in "iu":
            rr = {"counts": plain.reshape(1, 1, -1), "weighted": plain.astype(np.float64).reshape(1, 1, -1)}
    if rr is not None and features and not isinstance(rr, dict):
        raise PairkitError("rr: with rand_weights, jackknife or mean_theta, give the \"rr_cells\" of an earlier "
                           "result of the same random catalog, rand_weights, jackknife and mean_theta")
    if isinstance(rr, dict) and not features:
        raise PairkitError("rr: RR cells are for runs with weights, jackknife, mean_theta or prune; this run needs "
                           "the plain \"rr\" counts of an earlier result")
    with _Session(nthreads, backend) as s:
        d = s.catalog(ra, dec, units, "data")
        r = s.catalog(rand_ra, rand_dec, units, "random")
        if rr is not None and not features:
            return _w_theta_rr(s, d, r, edges, units, estimator, rr)
        wd = _finite(_array(weights, "weights", d.n), "weights") if weights is not None else None
        wr = _finite(_array(rand_weights, "rand_weights", r.n), "rand_weights") if rand_weights is not None else None
        if (wd is None) != (wr is None):
            wd = wd if wd is not None else np.ones(d.n)
            wr = wr if wr is not None else np.ones(r.n)
        b = s.bins_from(edges, units)
        ro = _RunOptions(_ptr(wd), _ptr(wr), 1 if mean_theta else 0, _jackknife_count(jackknife),
                         _PRUNE[prune])
        k_cells = ro.jackknife if ro.jackknife >= 2 else 1
        given, keep = None, []
        if rr is not None:
            given, keep = _rr_cells_in(rr, k_cells, len(edges) - 1, mean_theta, r.n)
        res, ex, cells = _Result(), _Extras(), _RRCells()
        try:  # freed however the call ends (Ctrl-C included)
            with interruptible(s.ctx):
                st = s.lib.pk_angcorr_run_ex_rr(ctypes.byref(s.ctx), ctypes.byref(s.opts), ctypes.byref(d),
                                                ctypes.byref(r), ctypes.byref(b), _ESTIMATORS[estimator],
                                                ctypes.byref(ro), ctypes.byref(given) if given is not None else None,
                                                ctypes.byref(cells), ctypes.byref(res), ctypes.byref(ex))
            _check(st, s.ctx)
            n = res.n_bins
            out = _counts_dict(res, edges)
            if ex.weighted:
                for name in ("dd_w", "dr_w", "rr_w"):
                    out[name] = np.ctypeslib.as_array(getattr(ex, name), (n,)).copy()
            if mean_theta:
                scale = 1.0 / _TO_RAD[units]
                for name in ("theta_mean_dd", "theta_mean_dr", "theta_mean_rr"):
                    out[name] = np.ctypeslib.as_array(getattr(ex, name), (n,)).copy() * scale
            if ex.n_patches:
                k = ex.n_patches
                out["omega_err"] = np.ctypeslib.as_array(ex.omega_err, (n,)).copy()
                out["cov"] = np.ctypeslib.as_array(ex.omega_cov, (n * n,)).copy().reshape(n, n)
                out["omega_jk"] = np.ctypeslib.as_array(ex.omega_jk, (k * n,)).copy().reshape(k, n)
            shape = (cells.n_patches, cells.n_patches, n)
            size = cells.n_patches * cells.n_patches * n
            out["rr_cells"] = {"counts": np.ctypeslib.as_array(cells.counts, (size,)).copy().reshape(shape),
                               "weighted": np.ctypeslib.as_array(cells.weighted, (size,)).copy().reshape(shape)}
            if mean_theta:
                out["rr_cells"]["theta_sum"] = np.ctypeslib.as_array(cells.theta_sum, (size,)).copy().reshape(shape)
        finally:
            s.lib.pk_angcorr_result_free(ctypes.byref(res))
            s.lib.pk_angcorr_extras_free(ctypes.byref(ex))
            s.lib.pk_angcorr_rr_cells_free(ctypes.byref(cells))
            del keep
    return out


def _rr_cells_in(rr, k, n, mean_theta, n_random):
    """The C view of given RR cells, checked for shape and values, and the
    arrays it points into (kept alive by the caller)."""
    names = ("counts", "weighted") + (("theta_sum",) if mean_theta else ())
    missing = [name for name in names if name not in rr]
    if missing:
        raise PairkitError("rr: the RR cells lack %s%s" % (
            ", ".join(missing), " (the earlier run had no mean_theta)" if missing == ["theta_sum"] else ""))
    arrays = []
    for name in names:
        a = rr[name]
        if isinstance(a, np.ma.MaskedArray):
            raise PairkitError("rr[%r]: a masked array" % name)
        a = np.asarray(a)
        if a.shape != (k, k, n):
            raise PairkitError("rr[%r] has shape %s; this run needs (%d, %d, %d) (patches, patches, bins)%s"
                               % (name, a.shape, k, k, n, "" if a.ndim != 3 or a.shape[2] == n else
                                  ": other bins"))
        if not np.array_equal(a, a.transpose(1, 0, 2), equal_nan=a.dtype.kind == "f"):
            raise PairkitError("rr[%r]: cell (p, q) must equal cell (q, p), as RR counts both orders of a pair"
                               % name)
        if name == "counts":
            if a.dtype.kind not in "iu" or np.any(a < 0) or sum(int(v) for v in a.ravel().tolist()) > n_random ** 2:
                raise PairkitError("rr['counts'] must be whole counts >= 0 adding up to at most the %d^2 pairs of "
                                   "the random catalog" % n_random)
            a = np.ascontiguousarray(a, dtype=np.uint64)
        else:
            if a.dtype.kind not in "iuf" or not np.all(np.isfinite(a)):
                raise PairkitError("rr[%r] must hold finite numbers" % name)
            a = np.ascontiguousarray(a, dtype=np.float64)
        arrays.append(a)
    c = _RRCells(k, n, arrays[0].ctypes.data_as(ctypes.POINTER(ctypes.c_uint64)),
                 arrays[1].ctypes.data_as(ctypes.POINTER(ctypes.c_double)),
                 arrays[2].ctypes.data_as(ctypes.POINTER(ctypes.c_double)) if mean_theta else None)
    return c, arrays


def _w_theta_rr(s, d, r, edges, units, estimator, rr):
    """w_theta's DD and DR with RR given."""
    if isinstance(rr, np.ma.MaskedArray):
        raise PairkitError("rr: a masked array; give the counts of every bin")
    try:
        raw = np.asarray(rr)
    except Exception as e:
        raise PairkitError("rr: not an array of counts (%s)" % (e,)) from None
    n = len(edges) - 1
    if raw.ndim != 1 or raw.size != n:
        raise PairkitError("rr must hold one count per bin (%d), got shape %s" % (n, raw.shape))
    if raw.dtype.kind not in "iuf":
        raise PairkitError("rr must hold whole counts, got dtype %s" % (raw.dtype,))
    if raw.dtype.kind == "f":
        bad = np.flatnonzero(~np.isfinite(raw) | (raw != np.floor(raw)))
        if bad.size:
            raise PairkitError("rr must hold whole counts; rr[%d] is %r" % (bad[0], _plain(raw[bad[0]])))
    if np.any(raw < 0) or sum(int(v) for v in raw.tolist()) > r.n * r.n:  # exact, Python integers
        raise PairkitError("rr: counts must be >= 0 and add up to at most the %d^2 pairs of the random catalog"
                           % r.n)
    counts = np.ascontiguousarray(raw, dtype=np.uint64)
    b = s.bins_from(edges, units)
    res = _Result()
    try:
        with interruptible(s.ctx):
            st = s.lib.pk_angcorr_run_part_rr(ctypes.byref(s.ctx), ctypes.byref(s.opts), 0, 1, ctypes.byref(d),
                                              ctypes.byref(r), ctypes.byref(b), _ESTIMATORS[estimator],
                                              counts.ctypes.data_as(ctypes.POINTER(ctypes.c_uint64)),
                                              ctypes.byref(res))
        _check(st, s.ctx)
        return _counts_dict(res, edges)
    finally:
        s.lib.pk_angcorr_result_free(ctypes.byref(res))


def _counts_dict(res, edges):
    """The bins, omega and the three counts of a result, as copies."""
    n = res.n_bins
    out = {"theta_lo": edges[:-1].copy(), "theta_hi": edges[1:].copy()}
    for name in ("omega", "dd", "dr", "rr"):
        out[name] = np.ctypeslib.as_array(getattr(res, name), (n,)).copy()
    return out
