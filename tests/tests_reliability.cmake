# Reliability: the fuzz targets' corpora and kept crashers replayed without
# libFuzzer (label cpu: every build, any compiler, the sanitizer build of CI
# too), a short libFuzzer run of each target when built with PK_FUZZ (label
# slow), and the injected faults (tests/test_fault_*.c). docs/reliability.md
# records what each one found.
foreach(name ${PK_FUZZ_TARGETS})
  add_executable(fuzz_replay_${name} tests/test_fuzz_replay.c fuzz/fuzz_${name}.c)
  target_compile_options(fuzz_replay_${name} PRIVATE ${PK_C_FLAGS})
  target_include_directories(fuzz_replay_${name} PRIVATE ${CMAKE_SOURCE_DIR}/src ${CMAKE_SOURCE_DIR}/fuzz)
  target_link_libraries(fuzz_replay_${name} PRIVATE pairkit)
  add_test(NAME test_fuzz_replay_${name}
           COMMAND fuzz_replay_${name} fuzz/corpus/${name} fuzz/regressions/${name}
           WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  set_tests_properties(test_fuzz_replay_${name} PROPERTIES LABELS cpu TIMEOUT 120)
  if(PK_FUZZ)
    # About a minute for all targets together; new inputs go to a scratch
    # folder, the corpus in the repository is only read.
    set(scratch ${CMAKE_BINARY_DIR}/fuzz_short/${name})
    add_test(NAME test_fuzz_short_${name}
             COMMAND sh -c "rm -rf '${scratch}' && mkdir -p '${scratch}' && r=fuzz/regressions/${name} && { [ -d $r ] || r=; } && exec '$<TARGET_FILE:fuzz_${name}>' -max_total_time=8 -print_final_stats=1 -artifact_prefix='${scratch}/' '${scratch}' fuzz/corpus/${name} $r"
             WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
    # allocator_may_return_null: cfitsio asks for absurd sizes on some
    # headers and copes with NULL, as with malloc in production
    set_tests_properties(test_fuzz_short_${name} PROPERTIES LABELS slow TIMEOUT 120
                         ENVIRONMENT "ASAN_OPTIONS=allocator_may_return_null=1")
  endif()
endforeach()

# Faults: a full disk under every output writer (root: a 64 KiB tmpfs).
pk_test(test_fault_disk TIMEOUT 120)
# Ctrl-C during memsort and memsort-gen; out of host memory and the limits.
pk_test(test_fault_sigint TIMEOUT 120)
# ulimit -f below each output, stdout on /dev/full
pk_test(test_fault_limits TIMEOUT 120)
pk_test(test_fault_memory TIMEOUT 120)
