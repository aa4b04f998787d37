/* progress.c - progress and cancellation from inside parallel loops. Worker
 * threads add the work they finished; only the caller's thread invokes the
 * user's callback, so callbacks never run concurrently. */
#include "common.h"

void pk_progress_begin(pk_progress *p, pk_context *ctx, double total, double base, double span) {
    p->ctx = ctx;
    p->total = total > 0 ? total : 1;
    p->base = base;
    p->span = span;
    p->done = 0;
    p->last_report = pk_now();
    p->cancelled = 0;
    /* Report the start, so that a cancellation asked before any work is done
     * is seen by the first pk_progress_add of any thread. */
    if (ctx && ctx->progress && ctx->progress(ctx->progress_user, base > 1 ? 1 : base)) p->cancelled = 1;
}

/* The fraction done, given to the callback; the cancel flag set when it
 * asks to stop. From the owning thread only. */
static void report(pk_progress *p) {
    double done;
#pragma omp atomic read
    done = p->done;
    p->last_report = pk_now();
    double frac = p->base + p->span * (done / p->total);
    if (p->ctx->progress(p->ctx->progress_user, frac > 1 ? 1 : frac)) p->cancelled = 1;
}

int pk_progress_add(pk_progress *p, double work, int is_owner_thread) {
#pragma omp atomic
    p->done += work;
    if (is_owner_thread && p->ctx && p->ctx->progress && !p->cancelled && pk_now() - p->last_report > 0.05) report(p);
    return p->cancelled;
}

int pk_progress_ask(pk_progress *p) {
    if (p->ctx && p->ctx->progress && !p->cancelled) report(p);
    return p->cancelled;
}
