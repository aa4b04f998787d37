# angcorr features of issue 6: weights, mean separations, pruned small
# scales, jackknife, CSV/FITS catalogs and edge files, against the reference.
pk_test(test_angcorr_features TIMEOUT 900)
pk_test(test_angcorr_formats)
