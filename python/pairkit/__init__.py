"""pairkit on numpy arrays: exact angular pair counts and w(theta), the
exact direct-Fourier image of radio visibilities, and the plan and fill of
zkVM memory traces.

A thin ctypes layer over the C library (libpairkit.so). Every pair lands in
the bin the float64 reference gives it, and every image is the exact
transform with the w term kept, on the CPU and on a CUDA GPU.

    import numpy as np, pairkit
    bins = np.logspace(-2, 1, 21)                       # edges in degrees
    res = pairkit.DDtheta_mocks(1, 2, bins, ra, dec)     # like Corrfunc's
    res["npairs"], res["thetaavg"]
    w = pairkit.w_theta(ra, dec, rand_ra, rand_dec, bins, jackknife=16)
    w["omega"], w["omega_err"], w["cov"]

    d = pairkit.read_vis("obs.uvfits")                   # or a .npz
    img = pairkit.dft_image(d["u"], d["v"], d["w"], d["vis"], npix=512, cell=2e-5, sign=d["sign"])
    psf = pairkit.dft_psf(d["u"], d["v"], d["w"], d["weight"], npix=512, cell=2e-5, sign=d["sign"])

    addr, chunk_start = pairkit.memsort_generate(1 << 25, seed=7)     # or read_trace("trace/")
    res = pairkit.memsort(addr, chunk_start=chunk_start, workers=16, worker=3)
    addrs, values = pairkit.memsort_rows(res, 3)

Angles are in degrees unless `units` says otherwise (angcorr); image cells
and direction cosines in radians. The library is looked up in
$PAIRKIT_LIB, then in the build/ folder of a source checkout (or, for a
module put in place by `cmake --install`, where that install put the
library), then by the system's library search.
"""
from ._core import PairkitError, library_path
from ._angcorr import DDtheta_mocks, w_theta
from ._dftimage import dft_image, dft_points, dft_psf, fit_beam, read_vis
from ._memsort import (Memsort, memsort, memsort_fill, memsort_generate, memsort_generate_dir, memsort_pin,
                       memsort_rows, read_memsort, read_memsort_fill, read_trace, write_trace)

__all__ = ["DDtheta_mocks", "w_theta", "read_vis", "dft_image", "dft_psf", "fit_beam", "dft_points", "memsort", "Memsort",
           "memsort_fill", "memsort_generate", "memsort_generate_dir", "memsort_pin", "memsort_rows", "read_memsort",
           "read_memsort_fill", "read_trace", "write_trace", "PairkitError", "library_path"]
