# dftimage: UVFITS input and FITS output through cfitsio, .npz through libzip;
# zlib for gzip-compressed FITS input (catalogs and UVFITS).
pkg_check_modules(CFITSIO REQUIRED IMPORTED_TARGET cfitsio)
pkg_check_modules(LIBZIP REQUIRED IMPORTED_TARGET libzip)
pkg_check_modules(ZLIB REQUIRED IMPORTED_TARGET zlib)
target_link_libraries(pairkit_objects PUBLIC PkgConfig::CFITSIO PkgConfig::LIBZIP PkgConfig::ZLIB)
target_link_libraries(pairkit PUBLIC PkgConfig::CFITSIO PkgConfig::LIBZIP PkgConfig::ZLIB)
target_link_libraries(pairkit_shared PUBLIC PkgConfig::CFITSIO PkgConfig::LIBZIP PkgConfig::ZLIB)
