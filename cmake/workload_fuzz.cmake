# Fuzzing: with -DPK_FUZZ=ON (clang, together with -DPK_SANITIZE=ON) every
# fuzz/fuzz_<parser>.c becomes a libFuzzer program fuzz_<parser> with the
# library instrumented for coverage, ASan and UBSan:
#   CC=clang-14 cmake -S . -B build-fuzz -DPK_FUZZ=ON -DPK_SANITIZE=ON -DPK_CUDA=OFF
#   build-fuzz/fuzz_catalog -max_total_time=600 fuzz/corpus/catalog   (a copy of it)
# Without PK_FUZZ the same files are built with a plain replay driver
# (tests/tests_reliability.cmake), so any compiler replays the corpora.
option(PK_FUZZ "Build the libFuzzer targets of fuzz/ (clang with -DPK_SANITIZE=ON)" OFF)
file(GLOB PK_FUZZ_SOURCES CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/fuzz/fuzz_*.c)
set(PK_FUZZ_TARGETS)
foreach(src ${PK_FUZZ_SOURCES})
  get_filename_component(name ${src} NAME_WE)
  string(REGEX REPLACE "^fuzz_" "" name ${name})
  list(APPEND PK_FUZZ_TARGETS ${name})
endforeach()
if(PK_FUZZ)
  if(NOT CMAKE_C_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "PK_FUZZ=ON needs clang (libFuzzer): CC=clang-14 cmake ... -DPK_FUZZ=ON -DPK_SANITIZE=ON")
  endif()
  if(NOT PK_SANITIZE)
    message(FATAL_ERROR "PK_FUZZ=ON goes with -DPK_SANITIZE=ON: a fuzzer without ASan and UBSan misses most bugs")
  endif()
  target_compile_options(pairkit_objects PRIVATE -fsanitize=fuzzer-no-link)
  foreach(name ${PK_FUZZ_TARGETS})
    add_executable(fuzz_${name} ${CMAKE_SOURCE_DIR}/fuzz/fuzz_${name}.c)
    target_compile_options(fuzz_${name} PRIVATE ${PK_C_FLAGS} -fsanitize=fuzzer)
    target_link_options(fuzz_${name} PRIVATE -fsanitize=fuzzer)
    target_link_libraries(fuzz_${name} PRIVATE pairkit)
  endforeach()
endif()
