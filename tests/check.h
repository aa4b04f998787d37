/* check.h - a minimal test harness: CHECK(cond, fmt, ...) records a
 * failure with file and line and goes on; check_finish() prints the
 * summary line and returns the exit code, check_skip() says why a test
 * cannot run here and returns 77 (skipped, for ctest). */
#ifndef PAIRKIT_CHECK_H
#define PAIRKIT_CHECK_H

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static int check_failures = 0, check_count = 0;

#define CHECK(cond, ...)                                                             \
    do {                                                                             \
        check_count++;                                                               \
        if (!(cond)) {                                                               \
            check_failures++;                                                        \
            fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                            \
            fprintf(stderr, "\n");                                                   \
        }                                                                            \
    } while (0)

#define CHECK_OK(st, ctx) CHECK((st) == PK_OK, "status %d: %s", (int)(st), (ctx)->message)

static inline int check_finish(const char *name) {
    printf("%s: %d checks, %d failed\n", name, check_count, check_failures);
    return check_failures ? 1 : 0;
}

static inline int check_skip(const char *name, const char *why) {
    printf("%s: SKIPPED: %s\n", name, why);
    return 77;
}

/* xorshift64* for reproducible random inputs; seed from the environment
 * (PAIRKIT_TEST_SEED) or the given default, printed by check_rng_make so
 * that a failure can be replayed. */
typedef struct check_rng {
    unsigned long long s;
} check_rng;

static inline check_rng check_rng_make(unsigned long long fallback) {
    const char *e = getenv("PAIRKIT_TEST_SEED");
    check_rng r = {e ? strtoull(e, NULL, 0) : fallback};
    if (r.s == 0) r.s = 0x9E3779B97F4A7C15ull;
    printf("seed %llu (PAIRKIT_TEST_SEED=%llu replays it)\n", r.s, r.s);
    return r;
}

static inline unsigned long long check_next(check_rng *r) {
    r->s ^= r->s >> 12;
    r->s ^= r->s << 25;
    r->s ^= r->s >> 27;
    return r->s * 2685821657736338717ull;
}

/* Uniform in [0, 1). */
static inline double check_uniform(check_rng *r) {
    return (double)(check_next(r) >> 11) * 0x1p-53;
}

/* Seconds on the monotonic clock, for deadlines in tests. */
static inline double check_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#endif
