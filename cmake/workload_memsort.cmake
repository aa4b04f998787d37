# memsort: the baselines that `pairkit bench memsort` times beside pairkit's
# own kernels live in bench/ and are compiled into the library objects (the
# bench command reaches them through bench/memsort_baselines.h). CUB comes
# with the CUDA toolkit; nothing else is needed.
target_sources(pairkit_objects PRIVATE ${CMAKE_SOURCE_DIR}/bench/memsort_baselines.c)
if(PK_HAVE_CUDA)
  target_sources(pairkit_objects PRIVATE ${CMAKE_SOURCE_DIR}/bench/memsort_cub_baseline.cu)
endif()
