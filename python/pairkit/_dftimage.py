"""Direct Fourier imaging of visibilities: the dftimage binding."""
import ctypes
import os

import numpy as np

from ._core import (PairkitError, _Context, _array, _check, _count, _finite, _fspath, _is_key, _not_masked,
                    _one_dimensional, _plain, _ptr, backend_code, interruptible, load, new_context)


# ---- the C structures (dftimage.h) -------------------------------------------

_D = ctypes.POINTER(ctypes.c_double)


class _Vis(ctypes.Structure):
    _fields_ = [("n", ctypes.c_size_t), ("u", _D), ("v", _D), ("w", _D), ("re", _D), ("im", _D),
                ("sign", ctypes.c_int), ("has_phase_centre", ctypes.c_int), ("ra0_deg", ctypes.c_double),
                ("dec0_deg", ctypes.c_double), ("freq_hz", ctypes.c_double), ("object", ctypes.c_char * 72),
                ("date_obs", ctypes.c_char * 32), ("n_records", ctypes.c_size_t), ("n_flagged", ctypes.c_size_t),
                ("weight_sum", ctypes.c_double), ("weight", _D), ("weighting", ctypes.c_int),
                ("robust", ctypes.c_double), ("bunit", ctypes.c_char * 24),
                ("equinox", ctypes.c_double), ("radesys", ctypes.c_char * 12)]


class _Options(ctypes.Structure):
    _fields_ = [("backend", ctypes.c_int), ("kernel", ctypes.c_int), ("precision", ctypes.c_int),
                ("sign", ctypes.c_int), ("want_imag", ctypes.c_int), ("gpu_memory", ctypes.c_size_t)]


class _Image(ctypes.Structure):
    _fields_ = [("n", ctypes.c_size_t), ("cell", ctypes.c_double), ("re", _D), ("im", _D), ("sign", ctypes.c_int),
                ("precision", ctypes.c_int), ("psf", ctypes.c_int), ("bmaj", ctypes.c_double),
                ("bmin", ctypes.c_double), ("bpa", ctypes.c_double), ("normalised", ctypes.c_int)]


class _Stats(ctypes.Structure):
    _fields_ = [("terms", ctypes.c_double), ("seconds", ctypes.c_double), ("kernel_ms", ctypes.c_double),
                ("kernel", ctypes.c_int), ("gpu_bands", ctypes.c_int), ("gpu_bytes", ctypes.c_size_t)]


_WEIGHTS = {"data": 0, "abs": 1, "unit": 2}
_PRECISION = {"single": 0, "double": 1}
_WEIGHTING = {"natural": 0, "uniform": 1, "briggs": 2}


def _declare(lib):
    """The dftimage functions' argument and result types."""
    P = ctypes.POINTER
    lib.pk_vis_read.argtypes = [P(_Context), ctypes.c_char_p, ctypes.c_int, P(_Vis)]
    lib.pk_vis_free.argtypes = [P(_Vis)]
    lib.pk_dftimage_run.argtypes = [P(_Context), P(_Options), P(_Vis), ctypes.c_size_t, ctypes.c_double, P(_Image),
                                    P(_Stats)]
    lib.pk_image_free.argtypes = [P(_Image)]
    lib.pk_dftimage_psf.argtypes = lib.pk_dftimage_run.argtypes
    lib.pk_dftimage_beam_fit.argtypes = [P(_Context), P(_Image), _D, _D, _D]
    lib.pk_vis_weighting.argtypes = [P(_Context), P(_Vis), ctypes.c_int, ctypes.c_double, ctypes.c_size_t,
                                     ctypes.c_double]
    lib.pk_dftimage_ref_points.argtypes = [P(_Context), P(_Vis), ctypes.c_int, ctypes.c_size_t, _D, _D, _D, _D]
    lib.pk_dftimage_kernel_from_name.argtypes = [ctypes.c_char_p]
    lib.pk_dftimage_kernel_name.argtypes = [ctypes.c_int]
    lib.pk_dftimage_kernel_name.restype = ctypes.c_char_p
    lib.pk_dftimage_kernel_precision.argtypes = [ctypes.c_int]
    lib.pk_cuda_built.argtypes = []
    for name in ("pk_vis_read", "pk_dftimage_run", "pk_dftimage_psf", "pk_vis_weighting", "pk_dftimage_beam_fit",
                 "pk_dftimage_ref_points",
                 "pk_dftimage_kernel_from_name", "pk_dftimage_kernel_precision", "pk_cuda_built"):
        getattr(lib, name).restype = ctypes.c_int


def _load():
    return load(_declare)


# The library's messages name the command line's options; here they are
# arguments.
_OPTION_NAMES = (("--precision double", "precision='double'"), ("--cell", "cell"), ("--size", "npix"),
                 ("--sign", "sign"), ("--weights data", "weights='data'"),
                 ("--weights abs or unit", "weights='abs' or 'unit'"), ("--weights", "weights"))


def _check_dft(st, ctx):
    try:
        _check(st, ctx)
    except PairkitError as e:
        message = str(e)
        for option, argument in _OPTION_NAMES:
            message = message.replace(option, argument)
        raise PairkitError(message) from None


def _sign(sign):
    if isinstance(sign, (bool, str)) or np.ndim(sign) != 0 or sign not in (1, -1):
        raise PairkitError("sign must be +1 or -1, got %r" % (sign,))
    return int(sign)


class _VisArrays:
    """A _Vis over the caller's arrays (checked and kept alive here)."""

    def __init__(self, u, v, w, vis, sign, weight=None):
        self.u = _finite(_array(u, "u"), "u")
        self.v = _finite(_array(v, "v", self.u.size), "v")
        self.w = _finite(_array(w, "w", self.u.size), "w")
        raw = _one_dimensional(vis, "vis")
        if raw.dtype.kind not in "biufc":
            raise PairkitError("vis must hold complex or real numbers, got dtype %s" % (raw.dtype,))
        if raw.size != self.u.size:
            raise PairkitError("vis has %d values, expected %d (one per u)" % (raw.size, self.u.size))
        c = raw.astype(np.complex128, copy=False)
        # copies: the weighting scales them in place (ascontiguousarray
        # would hand back the caller's memory for one visibility)
        self.re = _finite(np.array(c.real, dtype=np.float64, copy=True), "vis.real")
        self.im = _finite(np.array(c.imag, dtype=np.float64, copy=True), "vis.imag")
        self.c = _Vis()
        self.c.n = self.u.size
        self.c.u, self.c.v, self.c.w = _ptr(self.u), _ptr(self.v), _ptr(self.w)
        self.c.re, self.c.im = _ptr(self.re), _ptr(self.im)
        self.c.sign = _sign(sign)
        self.c.n_records = self.u.size
        if weight is None:
            self.weight = np.ones(self.u.size)
        else:
            self.weight = _finite(np.array(_array(weight, "weight", self.u.size), dtype=np.float64), "weight")
            bad = np.flatnonzero(self.weight <= 0)
            if bad.size:
                raise PairkitError("weight[%d] is %r: every weight must be > 0" % (bad[0], _plain(self.weight[bad[0]])))
        self.c.weight = _ptr(self.weight)
        self.c.weight_sum = float(self.weight.sum()) if weight is not None else float(self.u.size)

    def reweight(self, weighting, robust, npix, cell):
        """Imaging weights (pk_vis_weighting) on these copies of the arrays."""
        if not _is_key(weighting, _WEIGHTING):
            raise PairkitError("weighting must be natural, uniform or briggs (got %r)" % (weighting,))
        if isinstance(robust, (bool, str, bytes)) or not isinstance(robust, (int, float, np.integer, np.floating)):
            raise PairkitError("robust must be a number, got %r" % (_plain(robust),))
        if robust != 0 and weighting != "briggs":
            raise PairkitError("robust is the robustness of weighting='briggs'; give that too (or drop robust)")
        if not -5 <= robust <= 5:
            raise PairkitError("robust must lie in [-5, 5] (-2: near uniform, 2: near natural), got %r"
                               % (_plain(robust),))
        if weighting == "natural":
            return
        lib = _load()
        ctx = new_context(0)
        _check_dft(lib.pk_vis_weighting(ctypes.byref(ctx), ctypes.byref(self.c), _WEIGHTING[weighting],
                                        float(robust), npix, cell), ctx)


def read_vis(path, weights="data"):
    """Visibilities from a .npz (arrays u, v, w and data, as numpy.savez
    writes them) or a UVFITS file (random groups), as the command line reads
    them: u, v, w in wavelengths (UVFITS: seconds times each channel's
    frequency), one visibility per channel and IF, Stokes I from the
    parallel hands, weights applied and flagged data dropped.

    weights: "data" (as stored; weight <= 0 is flagged), "abs" (|weight|,
    for files that store them all negative) or "unit" (1 for every record
    not flagged). Returns a dict with "u", "v", "w", "vis" (complex128),
    "sign" (the format's convention: -1 for UVFITS, +1 for .npz; give it
    to dft_image), "phase_centre" ((ra0, dec0) in degrees, or None),
    "equinox" (of the phase centre, UVFITS EQUINOX or EPOCH, or None),
    "radesys" (its frame as the file declares it, RADESYS or RADECSYS:
    "FK5", "FK4", "ICRS", ..., or None),
    "freq_hz", "object", "date_obs", "bunit" (the data's unit, "" when
    unknown), "n_records", "n_flagged",
    "weight" (each visibility's weight; "vis" is the visibility times it)
    and "weight_sum"."""
    if not _is_key(weights, _WEIGHTS):
        raise PairkitError("weights must be data, abs or unit (got %r)" % (weights,))
    lib = _load()
    ctx = new_context(0)
    if weights != "data":
        try:
            with open(path, "rb") as f:
                is_zip = f.read(4) == b"PK\x03\x04"
        except OSError:
            is_zip = False  # the reader says why
        if is_zip:
            raise PairkitError("weights=%r: %s is a .npz, which has no weights (the option is for UVFITS)"
                               % (weights, os.fsdecode(path)))
    vis = _Vis()
    try:  # freed however the call ends (Ctrl-C after the read included)
        with interruptible(ctx):
            st = lib.pk_vis_read(ctypes.byref(ctx), _fspath(path), _WEIGHTS[weights], ctypes.byref(vis))
        _check_dft(st, ctx)
        n = vis.n

        def take(p):
            return np.ctypeslib.as_array(p, (n,)).copy() if n else np.zeros(0)

        out = {"u": take(vis.u), "v": take(vis.v), "w": take(vis.w)}
        out["vis"] = take(vis.re) + 1j * take(vis.im)
        out["weight"] = take(vis.weight)
        out["sign"] = vis.sign
        out["phase_centre"] = (vis.ra0_deg, vis.dec0_deg) if vis.has_phase_centre else None
        out["equinox"] = vis.equinox if vis.equinox > 0 else None
        out["radesys"] = vis.radesys.decode("utf-8", "replace") or None
        out["freq_hz"] = vis.freq_hz
        out["object"] = vis.object.decode("utf-8", "replace")
        out["date_obs"] = vis.date_obs.decode("utf-8", "replace")
        out["bunit"] = vis.bunit.decode("utf-8", "replace")
        out["n_records"], out["n_flagged"], out["weight_sum"] = vis.n_records, vis.n_flagged, vis.weight_sum
    finally:
        lib.pk_vis_free(ctypes.byref(vis))
    return out


def dft_image(u, v, w, vis, npix=700, cell=0.0005, sign=1, precision=None, imag=False, backend="auto",
              kernel=None, nthreads=0, weight=None, weighting="natural", robust=0.0, gpu_memory=None):
    """The exact dirty image, w term kept:

        I(l, m) = sum_k vis_k exp(sign 2 pi i (u_k l + v_k m + w_k (sqrt(1 - l^2 - m^2) - 1)))

    on npix x npix pixels of cell radians, u, v, w in wavelengths. Returns
    a float64 array img[b, a] (complex128 with imag=True) at
    l = (a - npix // 2) cell, m = (b - npix // 2) cell: columns grow with l
    (east), rows with m (north). Shown as astronomers do (east left,
    north up): imshow(img[:, ::-1], origin="lower").

    sign: +1 (the convention of .npz files from the GPU imaging lesson) or
    -1 (UVFITS); read_vis returns the file's. precision: "single" (the
    default, float32
    with fast sincos; relative L2 error below 3e-6 at cells near the
    Nyquist cell) or "double" (near 1e-14). backend: "auto" (a CUDA GPU
    when one takes a context, else the CPU), "cpu" or "cuda"; kernel: a
    name from `pairkit bench dftimage` to force one (its precision, unless
    precision says otherwise, which is an error). Ctrl-C stops the call.

    weight: each visibility's weight (> 0; vis is the visibility times
    it, as read_vis gives both), 1 each when None. weighting: "natural"
    (as given), "uniform" or "briggs" with robust (-2 near uniform, 2 near
    natural), from the summed weights of the image's uv cells (1 / (npix
    cell) wavelengths; (u, v) and (-u, -v) share one), as
    `pairkit dftimage --weighting` does.

    gpu_memory: GiB of GPU memory the CUDA backend may take (None: what
    the device has free); an image that does not fit is made in bands of
    rows, as `pairkit dftimage --gpu-memory` does."""
    return _image(u, v, w, vis, npix, cell, sign, precision, imag, backend, kernel, nthreads, weight, weighting,
                  robust, psf=False, gpu_memory=gpu_memory)


def dft_psf(u, v, w, weight=None, npix=700, cell=0.0005, sign=1, precision=None, backend="auto", kernel=None,
            nthreads=0, weighting="natural", robust=0.0, gpu_memory=None):
    """The point spread function (dirty beam) on the grid of dft_image: the
    image of the weights alone, divided by their sum, so 1 at the phase
    centre; weighting, robust and gpu_memory as for dft_image. A float64
    array psf[b, a]."""
    u_arr = _array(u, "u")
    return _image(u_arr, v, w, np.zeros(u_arr.size), npix, cell, sign, precision, False, backend, kernel, nthreads,
                  weight, weighting, robust, psf=True, gpu_memory=gpu_memory)


def fit_beam(psf, cell):
    """The Gaussian beam of a PSF (dft_psf's array, cell in radians): an
    elliptical Gaussian fitted to the main lobe (the pixels reached from the
    centre by steps that never rise, at half the centre's value or more).
    Returns (bmaj, bmin, bpa): FWHM in radians, the major axis's position
    angle in degrees east of north, in (-90, 90]. An error when the lobe
    reaches the edge or is not resolved by the cells."""
    _not_masked(psf, "psf")
    raw = np.asarray(psf)
    if raw.dtype.kind not in "biuf":  # complex (its imaginary part dropped), text, objects, None
        raise PairkitError("psf must be a real 2-D array (dft_psf's), got %s" % (
            "None" if psf is None else "dtype %s" % raw.dtype))
    a = np.ascontiguousarray(raw, dtype=np.float64)
    if a.ndim != 2 or a.shape[0] != a.shape[1]:
        raise PairkitError("psf must be a square 2-D array, got shape %s" % (a.shape,))
    _finite(a.ravel(), "psf")
    if isinstance(cell, (bool, str, bytes)) or not isinstance(cell, (int, float, np.integer, np.floating)):
        raise PairkitError("cell must be a number of radians, got %r" % (_plain(cell),))
    if not (np.isfinite(cell) and cell > 0):
        raise PairkitError("cell must be a finite number of radians > 0, got %r" % (_plain(cell),))
    lib = _load()
    ctx = new_context(0)
    image = _Image()
    image.n, image.cell, image.re, image.psf = a.shape[0], float(cell), _ptr(a), 1
    out = [ctypes.c_double(), ctypes.c_double(), ctypes.c_double()]
    _check_dft(lib.pk_dftimage_beam_fit(ctypes.byref(ctx), ctypes.byref(image), *[ctypes.byref(x) for x in out]),
               ctx)
    return tuple(x.value for x in out)


def _gpu_bytes(gib):
    """gpu_memory in GiB (None: no limit) as the library's byte count."""
    if gib is None:
        return 0
    if isinstance(gib, (bool, str, bytes)) or not isinstance(gib, (int, float, np.integer, np.floating)):
        raise PairkitError("gpu_memory must be a number of GiB, got %r" % (_plain(gib),))
    if not (np.isfinite(gib) and 0 < gib <= 1e6):
        raise PairkitError("gpu_memory must be a number of GiB > 0, got %r" % (_plain(gib),))
    return max(1, int(float(gib) * 2**30))


def _image(u, v, w, vis, npix, cell, sign, precision, imag, backend, kernel, nthreads, weight, weighting, robust,
           psf, gpu_memory):
    lib = _load()
    gpu_bytes = _gpu_bytes(gpu_memory)
    if precision is not None and not _is_key(precision, _PRECISION):
        raise PairkitError("precision must be single or double (got %r)" % (precision,))
    data = _VisArrays(u, v, w, vis, sign, weight)
    npix = _count(npix, "npix", 1, 1 << 20)
    if isinstance(cell, (bool, str, bytes)) or not isinstance(cell, (int, float, np.integer, np.floating)):
        raise PairkitError("cell must be a number of radians, got %r" % (_plain(cell),))
    cell = float(cell)
    data.reweight(weighting, robust, npix, cell)
    code = 0
    if kernel is not None:
        code = lib.pk_dftimage_kernel_from_name(str(kernel).encode())
        if code < 0 and str(kernel).startswith("cuda") and not lib.pk_cuda_built():
            raise PairkitError("kernel %r is a CUDA kernel, and this build has no CUDA backend" % (kernel,))
        if code < 0:
            raise PairkitError("kernel: unknown kernel %r" % (kernel,))
        own = "double" if lib.pk_dftimage_kernel_precision(code) == _PRECISION["double"] else "single"
        if precision is not None and precision != own:
            raise PairkitError("kernel %r computes in %s precision, precision=%r says otherwise: give one of the two"
                               % (kernel, own, precision))
        precision = own
    ctx = new_context(nthreads)
    opts = _Options(backend_code(backend), code, _PRECISION[precision or "single"], data.c.sign, 1 if imag else 0,
                    gpu_bytes)
    image, stats = _Image(), _Stats()
    try:  # the image is freed however the call ends (Ctrl-C included)
        with interruptible(ctx):
            run = lib.pk_dftimage_psf if psf else lib.pk_dftimage_run
            st = run(ctypes.byref(ctx), ctypes.byref(opts), ctypes.byref(data.c), npix, cell, ctypes.byref(image),
                     ctypes.byref(stats))
        _check_dft(st, ctx)
        out = np.ctypeslib.as_array(image.re, (npix, npix)).copy()
        if imag:
            out = out + 1j * np.ctypeslib.as_array(image.im, (npix, npix))
    finally:
        lib.pk_image_free(ctypes.byref(image))
    return out


def dft_points(u, v, w, vis, l, m, sign=1):
    """The float64 reference (libm sine and cosine per term) at any
    direction cosines l, m (l^2 + m^2 < 1): a complex128 array, one value
    per point; the specification dft_image is tested against."""
    lib = _load()
    data = _VisArrays(u, v, w, vis, sign)
    lv = _finite(_array(l, "l"), "l")
    mv = _finite(_array(m, "m", lv.size), "m")
    far = np.flatnonzero(lv * lv + mv * mv >= 1)
    if far.size:
        k = far[0]
        raise PairkitError("point %d (l, m = %r, %r) is beyond the sky: l^2 + m^2 must be < 1"
                           % (k, _plain(lv[k]), _plain(mv[k])))
    re, im = np.zeros(lv.size), np.zeros(lv.size)
    ctx = new_context(0)
    with interruptible(ctx):
        st = lib.pk_dftimage_ref_points(ctypes.byref(ctx), ctypes.byref(data.c), data.c.sign, lv.size, _ptr(lv),
                                        _ptr(mv), _ptr(re), _ptr(im))
    _check_dft(st, ctx)
    return re + 1j * im
