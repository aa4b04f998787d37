# angcorr on CUDA: every exact CUDA kernel against the float64 reference
# (skipped without a device; the host table checks run everywhere).
pk_test(test_angcorr_cuda LABELS cuda TIMEOUT 900)
