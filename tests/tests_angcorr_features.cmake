# angcorr features of issue 6: weights, mean separations, pruned small
# scales, jackknife, CSV/FITS catalogs and edge files, against the reference.
pk_test(test_angcorr_features TIMEOUT 900)
pk_test(test_angcorr_formats)
# What a run hands the user (counts, weighted counts, mean separations,
# omega of every estimator, CSV/ECSV columns) against the reference and the
# formulas; the estimators' zero guards; RR files that must be refused.
pk_test(test_angcorr_outputs)
# Corrfunc's binning rule (dot against cos of the edges) against pairkit's on
# the small-scale configuration: 20,000 objects by default, all with --slow.
pk_test(test_angcorr_corrfunc_rule ARGS 20000)
pk_test(test_angcorr_corrfunc_rule_full SOURCE test_angcorr_corrfunc_rule LABELS slow ARGS 0 TIMEOUT 1800)
# One unit of work holding more than 2^32 pairs of one bin (CPU, and CUDA
# when a device is present): 4.3e9 pairs a count.
pk_test(test_angcorr_big_units LABELS slow TIMEOUT 1200)
