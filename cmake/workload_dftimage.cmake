# dftimage: UVFITS input and FITS output through cfitsio, .npz through libzip.
pkg_check_modules(CFITSIO REQUIRED IMPORTED_TARGET cfitsio)
pkg_check_modules(LIBZIP REQUIRED IMPORTED_TARGET libzip)
target_link_libraries(pairkit_objects PUBLIC PkgConfig::CFITSIO PkgConfig::LIBZIP)
target_link_libraries(pairkit PUBLIC PkgConfig::CFITSIO PkgConfig::LIBZIP)
target_link_libraries(pairkit_shared PUBLIC PkgConfig::CFITSIO PkgConfig::LIBZIP)
