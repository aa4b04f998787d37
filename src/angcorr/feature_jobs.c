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
    int autocorr = job->b == NULL;
    memset(&job->ga, 0, sizeof job->ga);
    memset(&job->gb, 0, sizeof job->gb);
    memset(&job->plan, 0, sizeof job->plan);
    job->n_fp64 = 0;
    double theta_max = bins->edges[bins->n_bins];
    double chord2 = prune == PK_PRUNE_OFF ? 0.0 : pk_grid_prune_chord2(table);
    if (prune == PK_PRUNE_AUTO && theta_max >= M_PI / 3) chord2 = 0;
    if (prune == PK_PRUNE_AUTO && chord2 <= 0 && !weighted) return PK_ERR_UNSUPPORTED;
    pk_status st;
    if (chord2 > 0) {
        st = pk_grid_build_pair(ctx, job->a, job->wa, job->b, job->wb, theta_max, &job->ga, autocorr ? NULL : &job->gb);
    } else {
        st = pk_grid_build(ctx, job->a, job->wa, 0, &job->ga);
        if (st == PK_OK && !autocorr && (st = pk_grid_build(ctx, job->b, job->wb, 0, &job->gb)) != PK_OK)
            pk_grid_free(&job->ga);
    }
    if (st) return st;
    st = pk_grid_plan_build(ctx, &job->ga, autocorr ? NULL : &job->gb, theta_max, chord2, &job->plan);
    if (st == PK_OK && prune == PK_PRUNE_AUTO && !weighted &&
        (double)job->plan.pairs_visited > 0.67 * (double)job->plan.pairs_all)
        st = PK_ERR_UNSUPPORTED; /* the full-range kernels do better */
    if (st) pk_feature_job_free(job);
    return st;
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
        for (size_t i = 0; i < ga->n; i++) {
            double dot = pk_angcorr_dot_ref(ga->v.x[i], ga->v.y[i], ga->v.z[i], ga->v.x[i], ga->v.y[i], ga->v.z[i]);
            int32_t s = pk_edge_table_slot_fp64(table, dot);
            slots[s]++;
            if (wslots) {
                double w = ga->w ? ga->w[i] * ga->w[i] : 1.0;
                wslots[s] += w;
                if (tslots && s >= 1 && s <= (int32_t)bins->n_bins) tslots[s] += w * acos(fmin(fmax(dot, -1.0), 1.0));
            }
        }
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
