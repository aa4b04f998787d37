# memsort tests: the CPU kernel against the reference (cpu), the same cases
# on CUDA (cuda; skipped without a device), bad input and output (cpu), and
# the larger realistic traces (slow).
pk_test(test_memsort_cpu)
pk_test(test_memsort_cuda SOURCE test_memsort_cpu ARGS cuda LABELS cuda)
pk_test(test_memsort_input)
pk_test(test_memsort_baseline)
pk_test(test_memsort_files)
pk_test(test_memsort_cpu_big SOURCE test_memsort_cpu ARGS cpu big LABELS slow TIMEOUT 1800)
pk_test(test_memsort_cuda_big SOURCE test_memsort_cpu ARGS cuda big LABELS "cuda;slow" TIMEOUT 1800)
