"""pairkit's Python module against numpy brute force: counts exactly,
weighted sums and mean separations to float64 rounding, w(theta) with
jackknife, and clear errors for bad values."""
import os

import numpy as np
import pytest

import pairkit


def unit(ra, dec):
    ra, dec = np.radians(ra), np.radians(dec)
    return np.cos(dec) * np.cos(ra), np.cos(dec) * np.sin(ra), np.sin(dec)


def brute(ra1, dec1, ra2, dec2, edges, w1=None, w2=None):
    x1, y1, z1 = unit(ra1, dec1)
    x2, y2, z2 = unit(ra2, dec2)
    dot = (np.outer(x1, x2) + np.outer(y1, y2)) + np.outer(z1, z2)
    theta = np.degrees(np.arccos(np.clip(dot, -1, 1)))
    w = np.outer(w1 if w1 is not None else np.ones(len(ra1)), w2 if w2 is not None else np.ones(len(ra2)))
    k = np.searchsorted(edges, theta, side="right") - 1
    inside = (k >= 0) & (k < len(edges) - 1)
    n = len(edges) - 1
    counts = np.bincount(k[inside], minlength=n)
    wsum = np.bincount(k[inside], weights=w[inside], minlength=n)
    tsum = np.bincount(k[inside], weights=(w * theta)[inside], minlength=n)
    return counts, wsum, tsum


@pytest.fixture
def cats():
    rng = np.random.default_rng(6)
    ra1, dec1 = rng.uniform(10, 30, 700), rng.uniform(-10, 10, 700)
    ra2, dec2 = rng.uniform(10, 30, 900), rng.uniform(-10, 10, 900)
    return ra1, dec1, ra2, dec2, rng.uniform(0.5, 1.5, 700), rng.uniform(0.5, 1.5, 900)


EDGES = np.logspace(-1, 1, 13)


def test_cross_counts_weights_thetaavg(cats):
    ra1, dec1, ra2, dec2, w1, w2 = cats
    res = pairkit.DDtheta_mocks(0, 2, EDGES, ra1, dec1, weights1=w1, RA2=ra2, DEC2=dec2, weights2=w2,
                                output_thetaavg=True, weight_type="pair_product")
    counts, wsum, tsum = brute(ra1, dec1, ra2, dec2, EDGES, w1, w2)
    assert res.dtype.names == ("thetamin", "thetamax", "thetaavg", "npairs", "weightavg")
    np.testing.assert_array_equal(res["npairs"], counts)
    np.testing.assert_allclose(res["weightavg"] * res["npairs"], wsum, rtol=1e-12)
    # numpy's sin, cos and arccos are not glibc's to the last bit: separations
    # of 0.1 degree move by ~1e-11 relative (acos is ill-conditioned near 1)
    np.testing.assert_allclose(res["thetaavg"], tsum / wsum, rtol=1e-9)
    np.testing.assert_allclose(res["thetamin"], EDGES[:-1])


def test_corrfunc_positional_arguments_and_weight_shapes(cats):
    """Corrfunc's argument order: link_in_dec, link_in_ra, verbose, then
    output_thetaavg (13th), ... weight_type (20th); weights as a scalar or
    of shape (1, N), as Corrfunc takes them."""
    ra1, dec1, w1 = cats[0], cats[1], cats[4]
    plain = pairkit.DDtheta_mocks(1, 1, EDGES, ra1, dec1)
    np.testing.assert_array_equal(pairkit.DDtheta_mocks(1, 1, EDGES, ra1, dec1, None, None, None, None, True, True),
                                  plain)
    avg = pairkit.DDtheta_mocks(1, 1, EDGES, ra1, dec1, None, None, None, None, True, True, False, True)
    np.testing.assert_array_equal(avg, pairkit.DDtheta_mocks(1, 1, EDGES, ra1, dec1, output_thetaavg=True))
    assert np.all(avg["thetaavg"][avg["npairs"] > 0] > 0)
    args = [1, 1, EDGES, ra1, dec1, w1, None, None, None, True, True, False, False, False, 2, 2, 100, False,
            "fastest", "pair_product"]
    by_position = pairkit.DDtheta_mocks(*args)
    by_name = pairkit.DDtheta_mocks(1, 1, EDGES, ra1, dec1, weights1=w1, weight_type="pair_product")
    np.testing.assert_array_equal(by_position, by_name)
    scalar = pairkit.DDtheta_mocks(1, 1, EDGES, ra1, dec1, weights1=2.0, weight_type="pair_product")
    np.testing.assert_array_equal(scalar["npairs"], plain["npairs"])
    assert np.all(scalar["weightavg"][plain["npairs"] > 0] == 4.0)
    np.testing.assert_array_equal(
        pairkit.DDtheta_mocks(1, 1, EDGES, ra1, dec1, weights1=w1[np.newaxis, :], weight_type="pair_product"),
        by_name)
    with pytest.raises(pairkit.PairkitError, match=r"weights1 has shape \(2, 700\): .*one weight per object"):
        pairkit.DDtheta_mocks(1, 1, EDGES, ra1, dec1, weights1=np.ones((2, 700)), weight_type="pair_product")
    with pytest.raises(TypeError):
        pairkit.DDtheta_mocks(1, 1, EDGES, ra1, dec1, None, None, None, None, True, True, False, False, False, 2, 2,
                              100, False, "fastest", None, "deg")  # units is keyword only


def test_units_arcsec_match_degrees(cats):
    ra1, dec1 = cats[0][:300], cats[1][:300]
    deg = pairkit.DDtheta_mocks(1, 1, EDGES, ra1, dec1, output_thetaavg=True)
    sec = pairkit.DDtheta_mocks(1, 1, EDGES * 3600, ra1 * 3600, dec1 * 3600, output_thetaavg=True, units="arcsec")
    np.testing.assert_array_equal(sec["npairs"], deg["npairs"])
    # the positions rounded once more on the way (x 3600, then to radians): acos magnifies it near 1
    np.testing.assert_allclose(sec["thetaavg"], deg["thetaavg"] * 3600, rtol=1e-9)


def test_corrfunc_weight_type_and_timer(tmp_path, cats):
    ra1, dec1, w1 = cats[0], cats[1], cats[4]
    plain = pairkit.DDtheta_mocks(1, 1, EDGES, ra1, dec1, output_thetaavg=True)
    # weights with weight_type=None: not used, as in Corrfunc, with a warning
    with pytest.warns(UserWarning, match="weight_type=None are not used"):
        ignored = pairkit.DDtheta_mocks(1, 1, EDGES, ra1, dec1, weights1=w1, output_thetaavg=True)
    np.testing.assert_array_equal(ignored, plain)
    weighted = pairkit.DDtheta_mocks(1, 1, EDGES, ra1, dec1, weights1=w1, output_thetaavg=True,
                                     weight_type="pair_product")
    assert np.all(weighted["weightavg"][weighted["npairs"] > 0] > 0) and np.all(plain["weightavg"] == 0)
    # c_api_timer=True: (results, api_time), as Corrfunc returns them
    res, api_time = pairkit.DDtheta_mocks(1, 1, EDGES, ra1, dec1, output_thetaavg=True, c_api_timer=True)
    np.testing.assert_array_equal(res, plain)
    assert isinstance(api_time, float) and api_time > 0
    # a bins file named by bytes; a bins file with a NaN
    f = tmp_path / "bins.txt"
    f.write_text("\n".join("%.17g" % e for e in EDGES) + "\n")
    np.testing.assert_array_equal(pairkit.DDtheta_mocks(1, 1, os.fsencode(str(f)), ra1, dec1),
                                  pairkit.DDtheta_mocks(1, 1, EDGES, ra1, dec1))
    # the library's checks of the weights name them as given here
    tiny = np.full(len(ra1), 1e-200)
    with pytest.raises(pairkit.PairkitError, match=r"^weights1: \|weights\| from 1e-200"):
        pairkit.DDtheta_mocks(1, 1, EDGES, ra1, dec1, weights1=tiny, weight_type="pair_product")
    # booleans are not numbers here: an array of them (a mask) and nthreads=False
    with pytest.raises(pairkit.PairkitError, match="must hold real numbers, got dtype bool"):
        pairkit.DDtheta_mocks(1, 1, EDGES, ra1 > 2, dec1)
    with pytest.raises(pairkit.PairkitError, match="nthreads must be a whole number, got False"):
        pairkit.DDtheta_mocks(1, False, EDGES, ra1, dec1)
    nan_rows = tmp_path / "nan.txt"
    nan_rows.write_text("0.1 1.0\nnan 2.0\n")
    with pytest.raises(pairkit.PairkitError, match="not finite"):
        pairkit.DDtheta_mocks(1, 1, str(nan_rows), ra1, dec1)


def test_auto_counts_every_ordered_pair(cats):
    ra1, dec1 = cats[0], cats[1]
    edges = np.array([0.0, 0.5, 1.0, 3.0, 40.0])
    res = pairkit.DDtheta_mocks(1, 1, edges, ra1, dec1)
    counts, _, _ = brute(ra1, dec1, ra1, dec1, edges)
    np.testing.assert_array_equal(res["npairs"], counts)
    assert res["npairs"].sum() == len(ra1) ** 2  # every pair within 40 degrees, self-pairs in the first bin


def test_binfile_and_cpu_backend(tmp_path, cats):
    ra1, dec1, ra2, dec2 = cats[:4]
    f = tmp_path / "bins.txt"
    f.write_text("".join("%r %r\n" % (float(lo), float(hi)) for lo, hi in zip(EDGES[:-1], EDGES[1:])))
    a = pairkit.DDtheta_mocks(0, 2, str(f), ra1, dec1, RA2=ra2, DEC2=dec2, backend="cpu")
    b = pairkit.DDtheta_mocks(0, 2, EDGES, ra1, dec1, RA2=ra2, DEC2=dec2, backend="cpu", prune="off")
    np.testing.assert_array_equal(a["npairs"], b["npairs"])
    # a byte order mark at the start of the file is skipped, as in catalogs
    f.write_bytes(b"\xef\xbb\xbf" + f.read_bytes())
    c = pairkit.DDtheta_mocks(0, 2, str(f), ra1, dec1, RA2=ra2, DEC2=dec2, backend="cpu")
    np.testing.assert_array_equal(c["npairs"], b["npairs"])
    with pytest.raises(ValueError, match="embedded null byte"):
        pairkit.DDtheta_mocks(0, 2, str(f) + "\0x", ra1, dec1, RA2=ra2, DEC2=dec2, backend="cpu")


def test_w_theta_and_jackknife(cats):
    ra1, dec1, ra2, dec2, w1, w2 = cats
    w = pairkit.w_theta(ra1, dec1, ra2, dec2, EDGES, jackknife=4, mean_theta=True)
    dd, _, _ = brute(ra1, dec1, ra1, dec1, EDGES)
    dr, _, _ = brute(ra1, dec1, ra2, dec2, EDGES)
    rr, _, _ = brute(ra2, dec2, ra2, dec2, EDGES)
    nd, nr = len(ra1), len(ra2)
    ls = (dd / nd**2 - 2 * dr / (nd * nr) + rr / nr**2) / (rr / nr**2)
    np.testing.assert_array_equal(w["dd"], dd)
    np.testing.assert_allclose(w["omega"], ls, rtol=1e-12)
    assert w["cov"].shape == (12, 12) and w["omega_jk"].shape == (4, 12)
    assert np.all(np.isfinite(w["omega_err"]))
    # unit weights give the unweighted estimate
    ww = pairkit.w_theta(ra1, dec1, ra2, dec2, EDGES, weights=np.ones(nd), rand_weights=np.ones(nr))
    np.testing.assert_allclose(ww["omega"], w["omega"], rtol=1e-12)
    np.testing.assert_allclose(ww["dd_w"], dd, rtol=1e-15)


def test_w_theta_with_rr_given(cats):
    ra1, dec1, ra2, dec2 = cats[:4]
    full = pairkit.w_theta(ra1, dec1, ra2, dec2, EDGES)
    other_ra, other_dec = ra1[::2] + 0.1, dec1[::2]
    want = pairkit.w_theta(other_ra, other_dec, ra2, dec2, EDGES, estimator="hamilton")
    got = pairkit.w_theta(other_ra, other_dec, ra2, dec2, EDGES, estimator="hamilton", rr=full["rr"])
    for name in ("omega", "dd", "dr", "rr"):
        np.testing.assert_array_equal(got[name], want[name])
    negative = full["rr"].astype(np.int64) - 10**9
    masked = np.ma.masked_array(full["rr"], mask=np.zeros(len(full["rr"]), dtype=bool))
    over = full["rr"].copy()
    over[0] += len(ra2) ** 2 - int(over.sum()) + 1  # one more than all pairs
    for bad in (full["rr"][:-1], negative, full["rr"] * 1000, full["rr"] + 0.5, [[1, 2]], masked, over):
        with pytest.raises(pairkit.PairkitError, match="rr"):
            pairkit.w_theta(other_ra, other_dec, ra2, dec2, EDGES, rr=bad)
    with pytest.raises(pairkit.PairkitError, match="rr: with rand_weights, jackknife or mean_theta"):
        pairkit.w_theta(other_ra, other_dec, ra2, dec2, EDGES, rr=full["rr"], jackknife=4)
    # data weights alone and prune keep RR the plain counts, as on the command line
    w_other = np.linspace(0.5, 1.5, len(other_ra))
    # (on the CPU: two CUDA runs' weighted sums differ in their last bits, float64 atomics)
    for opts in (dict(weights=w_other, backend="cpu"), dict(prune="on", backend="cpu"),
                 dict(weights=w_other, prune="off", backend="cpu")):
        counted = pairkit.w_theta(other_ra, other_dec, ra2, dec2, EDGES, **opts)
        given = pairkit.w_theta(other_ra, other_dec, ra2, dec2, EDGES, rr=full["rr"], **opts)
        # whole counts held as floats, as the plain path takes them
        as_float = pairkit.w_theta(other_ra, other_dec, ra2, dec2, EDGES, rr=full["rr"].astype(float), **opts)
        for name in counted:
            if name != "rr_cells":
                assert np.array_equal(counted[name], given[name], equal_nan=True), (opts, name)
                assert np.array_equal(as_float[name], given[name], equal_nan=True), (opts, name)
    for big in (1e20, 2.0 ** 64):  # cast to uint64 they wrapped to 0, and the run went on
        with pytest.raises(pairkit.PairkitError, match=r"rr must hold whole counts >= 0; rr\[0\] is"):
            pairkit.w_theta(other_ra, other_dec, ra2, dec2, EDGES, weights=w_other, backend="cpu",
                            rr=np.r_[big, np.zeros(len(EDGES) - 2)])
    with pytest.raises(pairkit.PairkitError, match="rr: a masked array"):
        pairkit.w_theta(other_ra, other_dec, ra2, dec2, EDGES, weights=w_other, backend="cpu",
                        rr=np.ma.array(full["rr"].astype(float)))
    with pytest.raises(pairkit.PairkitError, match=r"rr must hold whole counts >= 0; rr\[0\] is 0.5"):
        pairkit.w_theta(other_ra, other_dec, ra2, dec2, EDGES, weights=w_other, backend="cpu",
                        rr=np.full(len(EDGES) - 1, 0.5))


def test_w_theta_with_rr_cells_given(cats):
    """RR per patch pair from a run of one data catalog, given to a run of
    another: every output equal to the run that counts RR (on the CPU,
    whose sums add in a fixed order; CUDA's float64 atomics do not)."""
    ra1, dec1, ra2, dec2, w1, w2 = cats
    opts = dict(rand_weights=w2, jackknife=4, mean_theta=True, backend="cpu")
    first = pairkit.w_theta(ra1, dec1, ra2, dec2, EDGES, weights=w1, **opts)
    cells = first["rr_cells"]
    assert cells["counts"].shape == (4, 4, len(EDGES) - 1)
    np.testing.assert_array_equal(cells["counts"].sum(axis=(0, 1)), first["rr"])
    np.testing.assert_allclose(cells["weighted"].sum(axis=(0, 1)), first["rr_w"], rtol=1e-13)
    np.testing.assert_array_equal(cells["counts"], cells["counts"].transpose(1, 0, 2))
    other_ra, other_dec, other_w = ra1[::2] + 0.1, dec1[::2], w1[::2]
    want = pairkit.w_theta(other_ra, other_dec, ra2, dec2, EDGES, weights=other_w, **opts)
    got = pairkit.w_theta(other_ra, other_dec, ra2, dec2, EDGES, weights=other_w, rr=cells, **opts)
    assert set(got) == set(want)
    for name in want:
        if name == "rr_cells":
            for part in want[name]:
                np.testing.assert_array_equal(got[name][part], want[name][part])
        else:
            np.testing.assert_array_equal(got[name], want[name])
    # cells of other patches, without the separation sums, or for a plain run
    with pytest.raises(pairkit.PairkitError, match=r"needs \(5, 5, 12\)"):
        pairkit.w_theta(other_ra, other_dec, ra2, dec2, EDGES, weights=other_w, rand_weights=w2, jackknife=5,
                        mean_theta=True, rr=cells)
    no_theta = {"counts": cells["counts"], "weighted": cells["weighted"]}
    with pytest.raises(pairkit.PairkitError, match="lack theta_sum"):
        pairkit.w_theta(other_ra, other_dec, ra2, dec2, EDGES, weights=other_w, rr=no_theta, **opts)
    with pytest.raises(pairkit.PairkitError, match="RR cells are for runs with"):
        pairkit.w_theta(other_ra, other_dec, ra2, dec2, EDGES, rr=cells)
    bad = dict(cells, counts=-cells["counts"].astype(np.int64))
    with pytest.raises(pairkit.PairkitError, match="whole counts >= 0"):
        pairkit.w_theta(other_ra, other_dec, ra2, dec2, EDGES, weights=other_w, rr=bad, **opts)
    lopsided = cells["counts"].copy()
    lopsided[0, 1] += 5
    with pytest.raises(pairkit.PairkitError, match=r"cell \(p, q\) must equal cell \(q, p\)"):
        pairkit.w_theta(other_ra, other_dec, ra2, dec2, EDGES, weights=other_w, rr=dict(cells, counts=lopsided),
                        **opts)
    bad = dict(cells, weighted=cells["weighted"] * np.nan)
    with pytest.raises(pairkit.PairkitError, match="finite"):
        pairkit.w_theta(other_ra, other_dec, ra2, dec2, EDGES, weights=other_w, rr=bad, **opts)


def test_bad_values(cats):
    ra1, dec1 = cats[0], cats[1]
    w = np.ones(len(ra1))
    w[5] = np.nan
    with pytest.raises(pairkit.PairkitError, match=r"weights1\[5\] is nan"):
        pairkit.DDtheta_mocks(1, 1, EDGES, ra1, dec1, weights1=w, weight_type="pair_product")
    with pytest.raises(pairkit.PairkitError, match="edges must increase"):
        pairkit.DDtheta_mocks(1, 1, [1.0, 1.0, 2.0], ra1, dec1)
    bad_dec = dec1.copy()
    bad_dec[3] = 95
    with pytest.raises(pairkit.PairkitError, match=r"RA1/DEC1\[3\]: dec 95"):
        pairkit.DDtheta_mocks(1, 1, EDGES, ra1, bad_dec)
    with pytest.raises(pairkit.PairkitError, match="expected 700"):
        pairkit.DDtheta_mocks(1, 1, EDGES, ra1, dec1[:10])
    with pytest.raises(pairkit.PairkitError, match="1 patch leaves nothing out"):
        pairkit.w_theta(ra1, dec1, ra1, dec1, EDGES, jackknife=1)
    with pytest.raises(pairkit.PairkitError, match="jackknife: 5000 patches need at least 5000 random objects"):
        pairkit.w_theta(ra1, dec1, ra1, dec1, EDGES, jackknife=5000)


def test_strict_arguments(tmp_path, cats):
    ra1, dec1 = cats[0], cats[1]
    # a misspelt keyword is an error, Corrfunc's tuning names are not
    with pytest.raises(TypeError, match="weight1"):
        pairkit.DDtheta_mocks(1, 1, EDGES, ra1, dec1, weight1=np.ones(len(ra1)))
    pairkit.DDtheta_mocks(1, 1, EDGES, ra1, dec1, isa="fastest", verbose=False, ra_refine_factor=2)
    # one-dimensional real arrays only: no silent flattening
    with pytest.raises(pairkit.PairkitError, match="one-dimensional"):
        pairkit.DDtheta_mocks(1, 1, EDGES, np.ones((3, 4)), np.zeros(12))
    with pytest.raises(pairkit.PairkitError, match="real numbers"):
        pairkit.DDtheta_mocks(1, 1, EDGES, ra1.astype(complex), dec1)
    with pytest.raises(pairkit.PairkitError, match="binfile .*nonexistent_bins: no such file$"):
        pairkit.DDtheta_mocks(1, 1, str(tmp_path / "nonexistent_bins"), ra1, dec1)
    with pytest.raises(pairkit.PairkitError, match="^bins: at least 2 edges are needed"):
        pairkit.w_theta(ra1, dec1, ra1, dec1, [1.0])
    with pytest.raises(pairkit.PairkitError, match="binfile must be one-dimensional"):
        pairkit.DDtheta_mocks(1, 1, np.array([[0.1, 1.0], [1.0, 2.0]]), ra1, dec1)
    # whole numbers in range, not truncated or wrapped
    with pytest.raises(pairkit.PairkitError, match="jackknife must be in 0 .. 10000"):
        pairkit.w_theta(ra1, dec1, ra1, dec1, EDGES, jackknife=2**31)
    with pytest.raises(pairkit.PairkitError, match="jackknife must be a whole number"):
        pairkit.w_theta(ra1, dec1, ra1, dec1, EDGES, jackknife=2.5)
    with pytest.raises(pairkit.PairkitError, match="nthreads must be in"):
        pairkit.DDtheta_mocks(1, 10**12, EDGES, ra1, dec1)
    with pytest.raises(pairkit.PairkitError, match="prune must be auto, on or off"):
        pairkit.w_theta(ra1, dec1, ra1, dec1, EDGES, prune="maybe")
    # a bin file's rows must be contiguous, as Corrfunc's; a missing one is a PairkitError
    gapped = tmp_path / "gapped.txt"
    gapped.write_text("0.1 1\n2 5\n")
    with pytest.raises(pairkit.PairkitError, match="row 2 starts at 2.0, row 1 ended at 1.0"):
        pairkit.DDtheta_mocks(1, 1, str(gapped), ra1, dec1)
    with pytest.raises(pairkit.PairkitError, match="no_such_file"):
        pairkit.DDtheta_mocks(1, 1, str(tmp_path / "no_such_file.txt"), ra1, dec1)


def test_bin_files_masks_and_flags(tmp_path, cats):
    ra1, dec1 = cats[0], cats[1]
    want = pairkit.DDtheta_mocks(1, 1, EDGES, ra1, dec1)
    # edges all on one line (as the command line's --edges files may be), or one a line
    row = tmp_path / "row.txt"
    row.write_text(" ".join(repr(float(e)) for e in EDGES) + "\n")
    col = tmp_path / "col.txt"
    col.write_text("".join("%r\n" % float(e) for e in EDGES))
    for f in (row, col):
        got = pairkit.DDtheta_mocks(1, 1, str(f), ra1, dec1)
        assert np.array_equal(got["npairs"], want["npairs"]) and np.allclose(got["thetamax"], want["thetamax"])
    wide = tmp_path / "wide.txt"
    wide.write_text("0.1 0.2 0.3\n0.3 0.4 0.5\n")
    with pytest.raises(pairkit.PairkitError, match="3 columns on 2 lines"):
        pairkit.DDtheta_mocks(1, 1, str(wide), ra1, dec1)
    with pytest.raises(pairkit.PairkitError, match="edge 2 is 200 degrees, beyond 180 degrees"):
        pairkit.DDtheta_mocks(1, 1, [0.1, 200.0], ra1, dec1)
    # a masked array is refused, not silently unmasked
    masked = np.ma.masked_array(ra1, mask=np.arange(ra1.size) >= 50)
    with pytest.raises(pairkit.PairkitError, match="RA1/DEC1 RA is a masked array"):
        pairkit.DDtheta_mocks(1, 1, EDGES, masked, dec1)
    # autocorr is 1 or 0
    for bad in ("no", 2):
        with pytest.raises(pairkit.PairkitError, match="autocorr must be 1"):
            pairkit.DDtheta_mocks(bad, 1, EDGES, ra1, dec1)
    with pytest.raises(pairkit.PairkitError, match=r"rr\[1\] is 2.5"):
        pairkit.w_theta(ra1, dec1, ra1, dec1, EDGES, rr=np.array([1.0, 2.5] + [0.0] * (len(EDGES) - 3)))


def test_choices_of_the_wrong_type_are_named(cats):
    # a list or an array where a name or a flag goes raised TypeError (unhashable) or numpy's "truth value"
    ra, dec = cats[0], cats[1]
    for kw, says in ((dict(units=["deg"]), "units"), (dict(backend=["cpu"]), "backend"),
                     (dict(estimator=["ls"]), "estimator")):
        with pytest.raises(pairkit.PairkitError, match=says):
            pairkit.w_theta(ra[:50], dec[:50], ra[:60], dec[:60], EDGES, **kw)
    with pytest.raises(pairkit.PairkitError, match="autocorr must be 1"):
        pairkit.DDtheta_mocks(np.array([1, 0]), 1, EDGES, ra[:50], dec[:50])
    # a flag that is not one; an estimator in Corrfunc's capitals is the same one
    for bad in ("no", 2, [True]):
        with pytest.raises(pairkit.PairkitError, match="mean_theta must be True or False"):
            pairkit.w_theta(ra[:50], dec[:50], ra[:60], dec[:60], EDGES, mean_theta=bad)
    np.testing.assert_array_equal(pairkit.w_theta(ra[:50], dec[:50], ra[:60], dec[:60], EDGES, estimator="LS")["omega"],
                                  pairkit.w_theta(ra[:50], dec[:50], ra[:60], dec[:60], EDGES)["omega"])



def test_float32_strided_and_integer_inputs_are_converted(cats):
    """Coordinates of another dtype, or a strided view, count as their
    float64 values (not reinterpreted as a float64 buffer)."""
    ra1, dec1, ra2, dec2 = (np.asarray(c[:300]) for c in cats[:4])
    ra32, dec32 = ra1.astype(np.float32), dec1.astype(np.float32)
    counts, _, _ = brute(ra32.astype(np.float64), dec32.astype(np.float64), ra2, dec2, EDGES)
    res = pairkit.DDtheta_mocks(0, 1, EDGES, ra32, dec32, RA2=ra2, DEC2=dec2)
    np.testing.assert_array_equal(res["npairs"], counts)
    both = np.stack([ra2, dec2], axis=1)  # columns: strided views
    strided = pairkit.DDtheta_mocks(0, 1, EDGES, ra32, dec32, RA2=both[:, 0], DEC2=both[:, 1])
    np.testing.assert_array_equal(strided["npairs"], counts)
    ira, idec = np.round(ra1).astype(np.int64), np.round(dec1).astype(np.int32)
    counts_i, _, _ = brute(ira.astype(np.float64), idec.astype(np.float64), ra2, dec2, EDGES)
    np.testing.assert_array_equal(pairkit.DDtheta_mocks(0, 1, EDGES, ira, idec, RA2=ra2, DEC2=dec2)["npairs"],
                                  counts_i)


def test_units_arcmin_match_brute_force(cats):
    ra1, dec1 = cats[0][:300], cats[1][:300]
    counts, _, tsum = brute(ra1, dec1, ra1, dec1, EDGES)
    res = pairkit.DDtheta_mocks(1, 1, EDGES * 60, ra1 * 60, dec1 * 60, output_thetaavg=True, units="arcmin")
    np.testing.assert_array_equal(res["npairs"], counts)
    np.testing.assert_allclose(res["thetaavg"], tsum / counts * 60, rtol=1e-9)


def test_pairkit_error_is_a_value_error(cats):
    assert issubclass(pairkit.PairkitError, ValueError)
    with pytest.raises(ValueError):
        pairkit.DDtheta_mocks(0, 1, EDGES, cats[0], cats[1][:-1], RA2=cats[2], DEC2=cats[3])


def test_w_theta_mean_theta_and_jackknife_values(cats):
    """theta_mean_* are the mean separations in the bins' units (numpy's
    brute force); omega_err and cov follow from the K leave-one-out
    values as the jackknife's (K - 1) / K sum of products."""
    ra1, dec1, ra2, dec2 = (c[:400] for c in cats[:4])
    for units, scale in (("deg", 1.0), ("arcmin", 60.0)):
        w = pairkit.w_theta(ra1 * scale, dec1 * scale, ra2 * scale, dec2 * scale, EDGES * scale, jackknife=5,
                            mean_theta=True, units=units)
        for name, (a, b, c, d) in (("dd", (ra1, dec1, ra1, dec1)), ("dr", (ra1, dec1, ra2, dec2)),
                                   ("rr", (ra2, dec2, ra2, dec2))):
            counts, _, tsum = brute(a, b, c, d, EDGES)
            np.testing.assert_array_equal(w[name], counts)
            np.testing.assert_allclose(w["theta_mean_" + name], tsum / counts * scale, rtol=1e-9)
    jk = w["omega_jk"]
    k = jk.shape[0]
    dev = jk - jk.mean(axis=0)
    cov = (k - 1) / k * dev.T @ dev
    np.testing.assert_allclose(w["cov"], cov, rtol=1e-9, atol=1e-15)
    np.testing.assert_allclose(w["omega_err"], np.sqrt(np.diag(cov)), rtol=1e-9)
