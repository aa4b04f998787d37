/* feature_jobs.c - the host's part of a count on the device's feature
 * kernel (cuda_features.cu): the grids and the visit plan before it, the
 * pairs it did not visit and the self-pairs of an autocorrelation after it.
 * Kept apart from the kernel's launch so that many counts (the patch pairs
 * of a jackknife) can be prepared by the CPU's threads and sent to the
 * device in one batch. Nothing here needs CUDA.
 */
#include <math.h>
#include <string.h>

#include "grid.h"

pk_status pk_feature_job_prepare(pk_context *ctx, pk_feature_job *job, const pk_bins *bins, const pk_edge_table *table,
                                 int prune, int weighted) {
    job->n_fp64 = 0;
    return pk_grid_count_prepare(ctx, job->a, job->wa, job->b, job->wb, bins, table, prune, weighted, &job->ga,
                                 &job->gb, &job->plan);
}

void pk_feature_job_finish(pk_feature_job *job, const pk_bins *bins, const pk_edge_table *table) {
    const size_t n_slots = (size_t)table->n_slots;
    const int autocorr = job->b == NULL;
    uint64_t *slots = job->slots;
    double *wslots = job->wslots, *tslots = job->tslots;
    const pk_grid *ga = &job->ga, *gbp = autocorr ? &job->ga : &job->gb;
    /* the pairs the plan skipped are beyond the last edge */
    slots[n_slots - 1] += job->plan.pairs_all - job->plan.pairs_visited;
    if (wslots) wslots[n_slots - 1] += pk_grid_plan_skipped_weight(&job->plan, ga, gbp, autocorr);
    uint64_t n_fp64 = job->n_fp64;
    if (autocorr) {
        /* the device counted j > i: both orders, then each object with itself */
        for (size_t s = 0; s < n_slots; s++) {
            slots[s] *= 2;
            if (wslots) wslots[s] *= 2;
            if (tslots) tslots[s] *= 2;
        }
        pk_grid_add_self_pairs(ga, bins, table, slots, wslots, tslots);
        n_fp64 += ga->n;
    }
    job->stats->pairs_visited = job->plan.pairs_visited + (autocorr ? ga->n : 0);
    job->stats->pairs_fp64 = n_fp64;
}

void pk_feature_job_free(pk_feature_job *job) {
    pk_grid_plan_free(&job->plan);
    pk_grid_free(&job->ga);
    pk_grid_free(&job->gb);
}
