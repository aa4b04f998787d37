"""pairkit.dft_image and dft_points against numpy's own direct sum and the
library's float64 reference; read_vis against numpy.load; orientation of a
point source for both signs; clear errors for bad values."""
import os

import numpy as np
import pytest

import pairkit

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LESSON = os.path.join(ROOT, "data", "vis", "lesson_small.npz")
MOJAVE = os.path.join(ROOT, "data", "vis", "mojave.uvfits")


def numpy_dft(u, v, w, vis, l, m, sign):
    n = np.sqrt(1 - l * l - m * m) - 1
    phase = sign * 2 * np.pi * (np.outer(l, u) + np.outer(m, v) + np.outer(n, w))
    return (np.exp(1j * phase) * vis).sum(axis=1)


def grid(npix, cell):
    c = npix // 2
    lm = (np.arange(npix) - c) * cell
    m, l = np.meshgrid(lm, lm, indexing="ij")  # [b, a]: row b is m, column a is l
    return l.ravel(), m.ravel()


@pytest.fixture
def random_vis():
    rng = np.random.default_rng(11)
    n = 400
    u, v, w = rng.normal(0, 300, n), rng.normal(0, 300, n), rng.normal(0, 30, n)
    vis = rng.normal(size=n) + 1j * rng.normal(size=n)
    return u, v, w, vis


def rel(a, b):
    return np.linalg.norm(a - b) / np.linalg.norm(b)


@pytest.mark.parametrize("sign", [1, -1])
def test_image_against_numpy_and_reference(random_vis, sign):
    u, v, w, vis = random_vis
    npix, cell = 48, 5e-4
    l, m = grid(npix, cell)
    truth = numpy_dft(u, v, w, vis, l, m, sign)
    ref = pairkit.dft_points(u, v, w, vis, l, m, sign=sign)
    assert rel(ref, truth) < 1e-12
    img64 = pairkit.dft_image(u, v, w, vis, npix=npix, cell=cell, sign=sign, precision="double", imag=True,
                              backend="cpu")
    assert img64.shape == (npix, npix) and img64.dtype == np.complex128
    assert rel(img64.ravel(), ref) < 1e-12
    img32 = pairkit.dft_image(u, v, w, vis, npix=npix, cell=cell, sign=sign, backend="cpu")
    assert img32.dtype == np.float64
    assert rel(img32.ravel(), ref.real) < 3e-6
    for kernel in ("ref", "cpu-f64"):
        k = pairkit.dft_image(u, v, w, vis, npix=npix, cell=cell, sign=sign, kernel=kernel, precision="double")
        assert rel(k.ravel(), ref.real) < 1e-12


@pytest.mark.parametrize("sign", [1, -1])
def test_point_source_lands_on_its_pixel(sign):
    rng = np.random.default_rng(3)
    n = 300
    u, v, w = rng.normal(0, 400, n), rng.normal(0, 400, n), rng.normal(0, 40, n)
    npix, cell = 64, 4e-4
    a0, b0 = 40, 21  # east of centre, south of centre
    l0, m0 = (a0 - npix // 2) * cell, (b0 - npix // 2) * cell
    n0 = np.sqrt(1 - l0 * l0 - m0 * m0) - 1
    vis = np.exp(-sign * 2j * np.pi * (u * l0 + v * m0 + w * n0))
    img = pairkit.dft_image(u, v, w, vis, npix=npix, cell=cell, sign=sign)
    b, a = np.unravel_index(np.argmax(img), img.shape)
    assert (a, b) == (a0, b0)
    assert img[b, a] == pytest.approx(n, rel=1e-5)


def test_read_vis_npz_matches_numpy():
    d = pairkit.read_vis(LESSON)
    z = np.load(LESSON)
    for name in ("u", "v", "w"):
        assert np.array_equal(d[name], z[name])
    assert np.array_equal(d["vis"], z["data"])
    assert d["sign"] == 1 and d["phase_centre"] is None and d["n_records"] == z["u"].size
    assert d["equinox"] is None and d["radesys"] is None


def test_read_vis_uvfits_and_image():
    d = pairkit.read_vis(MOJAVE)
    assert d["sign"] == -1 and d["u"].size > 0 and d["vis"].dtype == np.complex128
    ra0, dec0 = d["phase_centre"]
    assert ra0 == pytest.approx(187.7059, abs=1e-3) and dec0 == pytest.approx(12.3911, abs=1e-3)
    assert d["equinox"] == 2000.0 and d["radesys"] is None  # EQUINOX = 2.0E+03 and no RADESYS in the file
    # VLBA baselines need double precision at these cells; the image equals the reference
    npix, cell = 16, 2e-10
    img = pairkit.dft_image(d["u"], d["v"], d["w"], d["vis"], npix=npix, cell=cell, sign=d["sign"],
                            precision="double")
    l, m = grid(npix, cell)
    ref = pairkit.dft_points(d["u"], d["v"], d["w"], d["vis"], l, m, sign=d["sign"])
    assert rel(img.ravel(), ref.real) < 1e-12
    with pytest.raises(pairkit.PairkitError, match="double precision or a smaller cell \\(precision='double', cell\\)"):
        pairkit.dft_image(d["u"], d["v"], d["w"], d["vis"], npix=16, sign=d["sign"])
    unit = pairkit.read_vis(MOJAVE, weights="unit")
    assert unit["u"].size == d["u"].size and unit["weight_sum"] == unit["u"].size


def test_cuda_backend_or_a_clear_refusal(random_vis):
    u, v, w, vis = random_vis
    l, m = grid(32, 5e-4)
    ref = pairkit.dft_points(u, v, w, vis, l, m)
    try:
        img = pairkit.dft_image(u, v, w, vis, npix=32, cell=5e-4, backend="cuda")
    except pairkit.PairkitError as e:
        assert "CUDA" in str(e) or "GPU" in str(e) or "device" in str(e)
        return
    assert rel(img.ravel(), ref.real) < 3e-5


def test_gpu_memory_limit(random_vis):
    # on the GPU a limit below the image's needs makes it in bands of rows,
    # with the one-pass image's values; on the CPU it is accepted and unused
    u, v, w, vis = random_vis
    one = pairkit.dft_image(u, v, w, vis, npix=101, cell=5e-4)
    banded = pairkit.dft_image(u, v, w, vis, npix=101, cell=5e-4, gpu_memory=0.0002)
    assert rel(banded.ravel(), one.ravel()) < 1e-12
    psf = pairkit.dft_psf(u, v, w, npix=101, cell=5e-4, gpu_memory=0.0002)
    assert abs(psf[50, 50] - 1) < 1e-4


def test_bad_values(random_vis, tmp_path):
    u, v, w, vis = random_vis
    bad_u = u.copy()
    bad_u[3] = np.nan
    cases = [
        (lambda: pairkit.dft_image(bad_u, v, w, vis, npix=8), r"u\[3\] is nan"),
        (lambda: pairkit.dft_image(u, v[:-1], w, vis, npix=8), "v has 399 values, expected 400"),
        (lambda: pairkit.dft_image(u, v, w, vis[:10], npix=8), "vis has 10 values, expected 400"),
        (lambda: pairkit.dft_image(u, v, w, np.array([vis, vis]), npix=8), "vis must be one-dimensional"),
        (lambda: pairkit.dft_image(u, v, w, vis.astype(str), npix=8), "vis must hold complex or real"),
        (lambda: pairkit.dft_image(u, v, w, vis, npix=8, sign=0), "sign must be"),
        (lambda: pairkit.dft_image(u, v, w, vis, npix=8, precision="half"), "precision must be"),
        (lambda: pairkit.dft_image(u, v, w, vis, npix=0), "npix must be in"),
        (lambda: pairkit.dft_image(u, v, w, vis, npix=8.5), "npix must be a whole number"),
        (lambda: pairkit.dft_image(u, v, w, vis, npix=8, cell=-1), "cell size must be > 0"),
        (lambda: pairkit.dft_image(u, v, w, vis, npix=8, cell="x"), "cell must be a number"),
        (lambda: pairkit.dft_image(u, v, w, vis, npix=800, cell=0.01), "beyond the sky"),
        (lambda: pairkit.dft_image(u, v, w, vis, npix=8, kernel="nope"), "unknown kernel"),
        (lambda: pairkit.dft_image(u, v, w, vis, npix=8, backend="gpu"), "backend must be"),
        (lambda: pairkit.dft_image(u, v, w, vis, npix=8, gpu_memory=0), "gpu_memory must be a number of GiB > 0"),
        (lambda: pairkit.dft_image(u, v, w, vis, npix=8, gpu_memory="2G"), "gpu_memory must be a number of GiB"),
        (lambda: pairkit.dft_psf(u, v, w, npix=8, gpu_memory=float("nan")), "gpu_memory must be"),
        (lambda: pairkit.dft_points(u, v, w, vis, [0.0, 0.9], [0.0, 0.9]), "point 1 .* beyond the sky"),
        (lambda: pairkit.read_vis(str(tmp_path / "missing.uvfits")), "missing.uvfits"),
        (lambda: pairkit.read_vis(LESSON, weights="none"), "weights must be"),
        (lambda: pairkit.read_vis(LESSON, weights="abs"), "is a .npz, which has no weights"),
        (lambda: pairkit.dft_image(u, v, w, np.ma.masked_array(vis), npix=8), "vis is a masked array"),
        (lambda: pairkit.dft_image(u, v, w, vis, npix=8, cell="0.0005"), "cell must be a number"),
        (lambda: pairkit.dft_image(u, v, w, vis, npix=8, kernel="cpu-f64", precision="single"),
         "computes in double precision, precision='single' says otherwise"),
    ]
    for call, says in cases:
        with pytest.raises(pairkit.PairkitError, match=says):
            call()
    notes = tmp_path / "notes.npz"
    notes.write_text("not visibilities")
    with pytest.raises(pairkit.PairkitError, match="notes.npz"):
        pairkit.read_vis(notes)


def test_amplitudes_beyond_float32(random_vis):
    # an amplitude float32 sums cannot hold: refused naming it, imaged in float64
    u, v, w, vis = random_vis
    loud = vis.copy()
    loud[17] = 1e300
    with pytest.raises(pairkit.PairkitError, match=r"visibility 17: V = 1e\+300.*amplitudes.*precision='double'"):
        pairkit.dft_image(u, v, w, loud, npix=8)
    img = pairkit.dft_image(u, v, w, loud, npix=8, precision="double")
    assert np.isfinite(img).all() and np.abs(img).max() > 1e299
    with pytest.raises(pairkit.PairkitError, match="the weights sum to"):
        pairkit.dft_psf(u, v, w, weight=np.full(u.size, 1e37), npix=8)


def test_kernel_sets_the_precision(random_vis):
    u, v, w, vis = random_vis
    l, m = grid(16, 5e-4)
    ref = pairkit.dft_points(u, v, w, vis, l, m).real
    # a double-precision kernel with precision left out runs in double
    img = pairkit.dft_image(u, v, w, vis, npix=16, cell=5e-4, kernel="ref")
    assert rel(img.ravel(), ref) < 1e-12


def test_uvfits_weights_message_names_the_argument():
    with pytest.raises(pairkit.PairkitError, match="weights='abs' or 'unit'"):
        pairkit.read_vis(os.path.join(ROOT, "data", "vis", "1133866760.uvfits"))


def whole_image_seconds(u, v, w, vis):
    """About how long the 512 x 512 float64 image of these visibilities
    takes whole on this machine now: a twentieth of them timed, times 20
    (the work grows with the count)."""
    import time
    k = u.size // 20
    t0 = time.perf_counter()
    pairkit.dft_image(u[:k], v[:k], w[:k], vis[:k], npix=512, cell=1e-4, precision="double", backend="cpu")
    return 20 * (time.perf_counter() - t0)


def cancelled_within(whole):
    """The bound on a call cancelled 0.3 s in: 2 s, or a third of the
    whole call where the machine is slow now (other work beside it), so
    that a call that ran to the end fails it and one stopped passes."""
    return max(2.0, whole / 3)


def test_ctrl_c_stops_a_long_image(random_vis):
    """SIGINT during a long call ends it within a fraction of a second in
    KeyboardInterrupt (the library's progress callback sees it)."""
    import signal
    import threading
    import time
    rng = np.random.default_rng(5)
    n = 60000
    u, v, w = rng.normal(0, 300, n), rng.normal(0, 300, n), rng.normal(0, 30, n)
    vis = np.ones(n, complex)
    whole = whole_image_seconds(u, v, w, vis)
    timer = threading.Timer(0.3, lambda: os.kill(os.getpid(), signal.SIGINT))
    t0 = time.perf_counter()
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        pairkit.dft_image(u, v, w, vis, npix=512, cell=1e-4, precision="double", backend="cpu")  # ~10 s
    took = time.perf_counter() - t0
    timer.cancel()
    assert took < cancelled_within(whole), (took, whole)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    # and the next call runs as usual
    assert pairkit.dft_image(u[:10], v[:10], w[:10], vis[:10], npix=4, cell=1e-3).shape == (4, 4)


def test_another_signal_handlers_exception_ends_a_long_image():
    """An exception a signal handler raises during a long call (a SIGALRM
    timeout) ends the call within a fraction of a second as that
    exception, not as KeyboardInterrupt, and no handler or hook stays
    changed; a handler that raises nothing leaves the call to finish."""
    import signal
    import sys
    import time

    class Timeout(Exception):
        pass

    def on_alarm(signum, frame):
        raise Timeout("alarm")

    rng = np.random.default_rng(6)
    n = 60000
    u, v, w = rng.normal(0, 300, n), rng.normal(0, 300, n), rng.normal(0, 30, n)
    vis = np.ones(n, complex)
    whole = whole_image_seconds(u, v, w, vis)
    hook = sys.unraisablehook
    old = signal.signal(signal.SIGALRM, on_alarm)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.3)
        t0 = time.perf_counter()
        with pytest.raises(Timeout, match="alarm"):
            pairkit.dft_image(u, v, w, vis, npix=512, cell=1e-4, precision="double", backend="cpu")  # ~10 s
        took = time.perf_counter() - t0
        assert took < cancelled_within(whole), (took, whole)
        seen = []
        signal.signal(signal.SIGALRM, lambda signum, frame: seen.append(signum))
        signal.setitimer(signal.ITIMER_REAL, 0.05)
        image = pairkit.dft_image(u[:12000], v[:12000], w[:12000], vis[:12000], npix=256, cell=1e-4,
                                  precision="double", backend="cpu")  # ~0.5 s
        assert image.shape == (256, 256) and seen == [signal.SIGALRM]
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    assert sys.unraisablehook is hook and signal.getsignal(signal.SIGINT) is signal.default_int_handler


def numpy_weights(u, v, weight, npix, cell, weighting, robust=0.0):
    """Imaging weights written with numpy: cells of 1 / (npix cell)
    wavelengths, (u, v) and (-u, -v) in one, summed with np.unique."""
    x = np.sign(u * npix * cell) * np.floor(np.abs(u * npix * cell) + 0.5)
    y = np.sign(v * npix * cell) * np.floor(np.abs(v * npix * cell) + 0.5)
    flip = (y < 0) | ((y == 0) & (x < 0))
    x, y = np.where(flip, -x, x), np.where(flip, -y, y)
    _, cell_of, = np.unique(np.stack([x, y], axis=1), axis=0, return_inverse=True)[:2]
    cell_of = cell_of.ravel()
    W = np.bincount(cell_of, weights=weight)[cell_of]
    if weighting == "uniform":
        return weight / W
    f2 = (5 * 10.0 ** -robust) ** 2 / ((weight * W).sum() / weight.sum())
    return weight / (1 + W * f2)


@pytest.mark.parametrize("weighting,robust", [("uniform", 0.0), ("briggs", 0.0), ("briggs", -1.0), ("briggs", 1.5)])
def test_weighting_against_numpy(random_vis, weighting, robust):
    u, v, w, vis = random_vis
    u, v = u / 10, v / 10  # several visibilities a cell
    rng = np.random.default_rng(5)
    weight = rng.uniform(0.5, 2, u.size)
    npix, cell = 24, 0.002
    new = numpy_weights(u, v, weight, npix, cell, weighting, robust)
    l, m = grid(npix, cell)
    want = numpy_dft(u, v, w, vis * new / weight, l, m, 1).real.reshape(npix, npix)
    got = pairkit.dft_image(u, v, w, vis, npix=npix, cell=cell, precision="double", weight=weight,
                            weighting=weighting, robust=robust)
    assert rel(got, want) < 1e-12
    psf = pairkit.dft_psf(u, v, w, weight, npix=npix, cell=cell, precision="double", weighting=weighting,
                          robust=robust)
    want_psf = numpy_dft(u, v, w, new, l, m, 1).real.reshape(npix, npix) / new.sum()
    assert rel(psf, want_psf) < 1e-12
    assert psf[npix // 2, npix // 2] == pytest.approx(1, abs=1e-12)


def test_psf_of_read_vis():
    d = pairkit.read_vis(MOJAVE)
    assert d["weight"].size == d["u"].size and np.all(d["weight"] > 0)
    assert d["bunit"] == "UNCALIB"  # as the file says (the data are calibrated, in Jy)
    assert d["weight"].sum() == pytest.approx(d["weight_sum"], rel=1e-12)
    psf = pairkit.dft_psf(d["u"], d["v"], d["w"], d["weight"], npix=33, cell=2e-10, sign=d["sign"])
    assert psf[16, 16] == pytest.approx(1, abs=1e-5) and psf.max() == psf[16, 16]
    uniform = pairkit.dft_psf(d["u"], d["v"], d["w"], d["weight"], npix=33, cell=2e-10, sign=d["sign"],
                              weighting="uniform")
    assert (uniform >= 0.5).sum() < (psf >= 0.5).sum()  # a narrower main lobe


def test_weighting_errors(random_vis):
    u, v, w, vis = random_vis
    with pytest.raises(pairkit.PairkitError, match="natural, uniform or briggs"):
        pairkit.dft_image(u, v, w, vis, npix=8, weighting="robust")
    with pytest.raises(pairkit.PairkitError, match="weighting='briggs'"):
        pairkit.dft_image(u, v, w, vis, npix=8, robust=1)
    with pytest.raises(pairkit.PairkitError, match=r"\[-5, 5\]"):
        pairkit.dft_image(u, v, w, vis, npix=8, weighting="briggs", robust=7)
    bad = np.ones(u.size)
    bad[3] = 0
    with pytest.raises(pairkit.PairkitError, match=r"weight\[3\]"):
        pairkit.dft_psf(u, v, w, bad, npix=8)
    bad[3] = np.nan
    with pytest.raises(pairkit.PairkitError, match=r"weight\[3\]"):
        pairkit.dft_image(u, v, w, vis, npix=8, weight=bad)
    with pytest.raises(pairkit.PairkitError, match="weight has"):
        pairkit.dft_image(u, v, w, vis, npix=8, weight=np.ones(3))


def test_fit_beam():
    n, cell = 81, 1e-5
    c = n // 2
    lm = (np.arange(n) - c) * cell
    y, x = np.meshgrid(lm, lm, indexing="ij")  # [b, a]: x = l east, y = m north
    t = np.radians(35.0)
    along, across = x * np.sin(t) + y * np.cos(t), -x * np.cos(t) + y * np.sin(t)
    psf = np.exp(-4 * np.log(2) * ((along / 2e-4) ** 2 + (across / 1e-4) ** 2))
    bmaj, bmin, bpa = pairkit.fit_beam(psf, cell)
    assert bmaj == pytest.approx(2e-4, rel=1e-9) and bmin == pytest.approx(1e-4, rel=1e-9)
    assert bpa == pytest.approx(35.0, abs=1e-7)
    with pytest.raises(pairkit.PairkitError, match="edge"):
        pairkit.fit_beam(psf[35:46, 35:46], cell)
    with pytest.raises(pairkit.PairkitError, match="square"):
        pairkit.fit_beam(psf[:, :10], cell)
    # cells and PSFs the fit cannot use, said as such (a cell of 0 was "an image of at least 3 x 3 pixels")
    for bad in (0, -cell, float("nan"), float("inf")):
        with pytest.raises(pairkit.PairkitError, match="cell must be a finite number of radians > 0"):
            pairkit.fit_beam(psf, bad)
    for bad, says in ((np.ma.array(psf, mask=psf < 0.9), "masked"), (psf + 0j, "real 2-D array"),
                      ([["a", "b"], ["c", "d"]], "real 2-D array"), (None, "got None")):
        with pytest.raises(pairkit.PairkitError, match=says):
            pairkit.fit_beam(bad, cell)


def test_weighting_leaves_the_callers_arrays():
    for n in (1, 2, 50):
        vis = np.full(n, 3 + 1j)
        weight = np.full(n, 2.0)
        u, v, w = np.arange(n) * 10.0 + 10, np.full(n, 5.0), np.zeros(n)
        pairkit.dft_image(u, v, w, vis, npix=8, cell=1e-3, weight=weight, weighting="uniform")
        pairkit.dft_image(u, v, w, vis.real, npix=8, cell=1e-3, weight=weight, weighting="briggs")
        assert np.all(vis == 3 + 1j) and np.all(weight == 2.0)


def test_a_point_on_the_horizon_is_refused(random_vis):
    u, v, w, vis = random_vis
    for l, m in ((1.0, 0.0), (0.0, -1.0), (0.6, 0.8)):
        with pytest.raises(pairkit.PairkitError, match="beyond the sky"):
            pairkit.dft_points(u, v, w, vis, [0.0, l], [0.0, m])


def test_sigint_after_the_last_look_still_interrupts():
    """A SIGINT that comes while the block runs but after the library's
    last progress call drops the result all the same: KeyboardInterrupt."""
    import signal
    from pairkit import _core
    ctx = _core.new_context(0)
    with pytest.raises(KeyboardInterrupt):
        with _core.interruptible(ctx):
            os.kill(os.getpid(), signal.SIGINT)
            for _ in range(1000):  # the handler runs between bytecodes
                pass
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
