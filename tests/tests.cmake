# Tests are plain executables using tests/check.h, registered with ctest and
# labelled: cpu (default run), cuda (skip without a device), slow.
function(pk_test name)
  cmake_parse_arguments(T "" "TIMEOUT;SOURCE" "LABELS;ARGS;LIBS" ${ARGN})
  if(NOT T_SOURCE)
    set(T_SOURCE ${name})
  endif()
  if(NOT TARGET ${T_SOURCE})
    add_executable(${T_SOURCE} tests/${T_SOURCE}.c)
    target_compile_options(${T_SOURCE} PRIVATE ${PK_C_FLAGS})
    target_include_directories(${T_SOURCE} PRIVATE ${CMAKE_SOURCE_DIR}/src ${CMAKE_SOURCE_DIR}/tests)
    target_link_libraries(${T_SOURCE} PRIVATE pairkit ${T_LIBS})
  endif()
  add_test(NAME ${name} COMMAND ${T_SOURCE} ${T_ARGS} WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  if(NOT T_LABELS)
    set(T_LABELS cpu)
  endif()
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 300)
  endif()
  set_tests_properties(${name} PROPERTIES LABELS "${T_LABELS}" TIMEOUT ${T_TIMEOUT}
                       SKIP_RETURN_CODE 77 ENVIRONMENT "PAIRKIT_CLI=$<TARGET_FILE:pairkit_cli>")
endfunction()

pk_test(test_angcorr_ref)
pk_test(test_plot_preview)
target_sources(test_plot_preview PRIVATE ${CMAKE_SOURCE_DIR}/tools/pairkit/preview.c
                                         ${CMAKE_SOURCE_DIR}/tools/pairkit/plot_axes.c)
pk_test(test_cli_hash)
target_sources(test_cli_hash PRIVATE ${CMAKE_SOURCE_DIR}/tools/pairkit/mpi.c)
pk_test(test_angcorr_edges)
pk_test(test_angcorr_random)
pk_test(test_angcorr_input)
pk_test(test_angcorr_cli)
pk_test(test_angcorr_bundled ARGS 12000)
pk_test(test_angcorr_bundled_full SOURCE test_angcorr_bundled LABELS slow ARGS 0 TIMEOUT 3600)
# One file of tests per further workload: tests/tests_<workload>.cmake.
file(GLOB PK_TEST_CMAKE CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/tests/tests_*.cmake)
foreach(f ${PK_TEST_CMAKE})
  include(${f})
endforeach()

# MPI: the command under mpirun with K = 1, 2, 3 ranks (CPU backend).
# Label nosan: Open MPI's own allocations (some in plugins it unloads, which
# no suppression can name) are reported as leaks under LeakSanitizer.
find_program(PK_MPIRUN mpirun)
if(MPI_C_FOUND AND PK_MPIRUN)
  add_test(NAME test_angcorr_mpi COMMAND bash ${CMAKE_SOURCE_DIR}/tests/test_angcorr_mpi.sh
           WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  set_tests_properties(test_angcorr_mpi PROPERTIES LABELS "cpu;mpi;nosan" TIMEOUT 300
                       ENVIRONMENT "PAIRKIT_CLI=$<TARGET_FILE:pairkit_cli>")
  pk_test(test_dftimage_mpi LABELS "cpu;mpi;nosan")
  add_test(NAME test_memsort_mpi COMMAND bash ${CMAKE_SOURCE_DIR}/tests/test_memsort_mpi.sh
           WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  set_tests_properties(test_memsort_mpi PROPERTIES LABELS "cpu;mpi;nosan" TIMEOUT 300
                       ENVIRONMENT "PAIRKIT_CLI=$<TARGET_FILE:pairkit_cli>")
endif()

# cmake --install, then the README's library example built against the
# installed copy through pairkit.pc, shared and static (nosan: the consumer
# is built without the sanitizers the library would need).
add_test(NAME test_install COMMAND bash ${CMAKE_SOURCE_DIR}/tests/test_install.sh ${CMAKE_BINARY_DIR}
         WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
set_tests_properties(test_install PROPERTIES LABELS "cpu;nosan" TIMEOUT 300 SKIP_RETURN_CODE 77)

# The layout of every source file against .clang-format (clang-format 14).
add_test(NAME test_format COMMAND sh scripts/check_format.sh WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
set_tests_properties(test_format PROPERTIES LABELS cpu TIMEOUT 120 SKIP_RETURN_CODE 77)

# Every command's options, as its --help lists them, against its parser.
pk_test(test_cli_options TIMEOUT 120)

# What the public headers promise beyond the results (messages, frees, argument checks, file modes).
pk_test(test_api_contracts)
