# dftimage tests: every kernel against the float64 reference (cpu), the
# readers on the real files and broken copies (cpu), CUDA (skipped without
# a device), the sky image and the command line.
pk_test(test_dftimage_kernels)
pk_test(test_dftimage_npz)
pk_test(test_dftimage_uvfits)
pk_test(test_dftimage_weighting)
pk_test(test_dftimage_cuda LABELS cuda)
pk_test(test_dftimage_sky)
pk_test(test_dftimage_cli)
