# angcorr on CUDA: every exact CUDA kernel against the float64 reference
# (skipped without a device; the host table checks run everywhere).
pk_test(test_angcorr_cuda LABELS cuda TIMEOUT 900)
# 1.2e7 x 1.2e7 on the equator with a one-row kernel: past 2^31 tiles of
# 256 x 256, every bin known (~140 s on an H200).
pk_test(test_angcorr_cuda_equator SOURCE test_angcorr_cuda LABELS "cuda;slow" ARGS equator 12000000 cuda-chord-offset
        TIMEOUT 3600)
# The device memory kept between counts (built with CUDA only).
if(PK_HAVE_CUDA)
  pk_test(test_cuda_pool LABELS cuda)
  pk_test(test_cuda_pool_fill SOURCE test_cuda_pool LABELS "cuda;slow" ARGS fill)
endif()
