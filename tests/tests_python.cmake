# The Python module (python/pairkit, ctypes over libpairkit.so) with pytest
# on Debian's python3 and numpy (/usr/bin/python3: a python3 earlier on PATH
# may lack numpy). Skipped (77) when pytest or numpy is missing; label nosan:
# python cannot load the sanitizer build of the library.
add_test(NAME test_python
         COMMAND sh -c "/usr/bin/python3 -c 'import numpy, pytest' 2>/dev/null || exit 77; exec /usr/bin/python3 -m pytest -q -p no:cacheprovider python/tests"
         WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
set_tests_properties(test_python PROPERTIES LABELS "cpu;nosan" TIMEOUT 600 SKIP_RETURN_CODE 77
                     ENVIRONMENT "PAIRKIT_LIB=$<TARGET_FILE:pairkit_shared>;PYTHONPATH=${CMAKE_SOURCE_DIR}/python;PYTHONDONTWRITEBYTECODE=1")
