/* rr_file.c - a random catalog's RR counts kept in a file, for runs of other
 * data catalogs against the same random catalog and bins.
 *
 * The file (text, docs/angcorr.md):
 *
 *   pairkit-rr 1
 *   random N HASH          N objects; HASH: FNV-1a 64 of their (ra, dec) doubles
 *   bins B
 *   counts SUM             SUM: a 64-bit checksum of the B counts (counts_sum)
 *   LO HI RR               B lines: edges in radians (%.17g, exact on reading), count
 *
 * and, for runs with random weights, mean separations or jackknife
 * patches (pk_angcorr_run_ex_rr), the RR of every patch pair:
 *
 *   pairkit-rr 2
 *   random N HASH
 *   weights none | weights HASH    HASH: FNV-1a 64 of the random weights' bits
 *   patches K HASH         K (1: none); HASH: of the randoms' patch numbers
 *   mean-theta 0|1
 *   bins B
 *   counts SUM             over every number of the cell lines
 *   LO HI                  B lines of edges
 *   P Q BIN RR W [T]       for P <= Q < K and each bin: count, weighted sum,
 *                          separation sum (mean-theta 1); (Q, P) is the same
 *
 * Reading checks every field against the random catalog, weights, patches
 * and bins of the run, and the counts against their checksum, so that
 * counts of another catalog, other weights or bins, or counts edited since,
 * are refused, with the file, the line and what differs.
 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "angcorr_internal.h"

#define RR_MAGIC "pairkit-rr 1"
#define RR_CELLS_MAGIC "pairkit-rr 2"

/* FNV-1a steps over 64-bit values (the values, not their bytes, so the
 * same on any machine). */
static uint64_t fnv_step(uint64_t h, uint64_t v) {
    return (h ^ v) * 0x100000001b3ull;
}
#define FNV_START 0xcbf29ce484222325ull

/* Over the bits of the catalog's coordinates, RA then Dec of each object:
 * any change to an object, or to their order, changes it. */
static uint64_t catalog_hash(const pk_catalog *c) {
    uint64_t h = FNV_START;
    for (size_t i = 0; i < c->n; i++) {
        uint64_t ra, dec;
        memcpy(&ra, &c->ra[i], sizeof ra);
        memcpy(&dec, &c->dec[i], sizeof dec);
        h = fnv_step(fnv_step(h, ra), dec);
    }
    return h;
}

/* Over the bits of n doubles; FNV_START for none. */
static uint64_t doubles_hash(const double *x, size_t n) {
    uint64_t h = FNV_START;
    for (size_t i = 0; i < n; i++) {
        uint64_t b;
        memcpy(&b, &x[i], sizeof b);
        h = fnv_step(h, b);
    }
    return h;
}

/* Over the counts. */
static uint64_t counts_sum(const uint64_t *rr, size_t n) {
    uint64_t h = FNV_START;
    for (size_t k = 0; k < n; k++) h = fnv_step(h, rr[k]);
    return h;
}

/* The arguments every RR file function needs (fn names it): a path, the
 * random catalog, bins and the counts or cells (what: their name). */
static pk_status rr_arguments(pk_context *ctx, const char *fn, const char *path, const pk_catalog *random,
                              const pk_bins *bins, const void *counts, const char *what) {
    if (!path) return pk_fail(ctx, PK_ERR_INVALID, "%s: path is NULL", fn);
    if (!random) return pk_fail(ctx, PK_ERR_INVALID, "%s: random is NULL", fn);
    if (!counts) return pk_fail(ctx, PK_ERR_INVALID, "%s: %s is NULL", fn, what);
    pk_status st = pk_bins_check(ctx, bins);
    if (st == PK_OK) st = pk_angcorr_check_sizes(ctx, random, NULL);
    return st;
}

pk_status pk_angcorr_write_rr(pk_context *ctx, const char *path, const pk_catalog *random, const pk_bins *bins,
                              const uint64_t *rr) {
    pk_clear(ctx);
    pk_status st = rr_arguments(ctx, __func__, path, random, bins, rr, "rr");
    if (st) return st;
    pk_atomic_file f;
    if ((st = pk_atomic_open(ctx, &f, path)) != PK_OK) return st;
    fprintf(f.fp, "%s\nrandom %zu %016" PRIx64 "\nbins %zu\ncounts %016" PRIx64 "\n", RR_MAGIC, random->n,
            catalog_hash(random), bins->n_bins, counts_sum(rr, bins->n_bins));
    for (size_t k = 0; k < bins->n_bins; k++)
        fprintf(f.fp, "%.17g %.17g %" PRIu64 "\n", bins->edges[k], bins->edges[k + 1], rr[k]);
    return pk_atomic_commit(ctx, &f);
}

/* The next line of text at *p (without its end), or NULL at the end. */
static char *next_line(char **p) {
    if (!**p) return NULL;
    char *s = *p, *e = strchr(s, '\n');
    if (e) {
        *e = '\0';
        *p = e + 1;
    } else {
        *p = s + strlen(s);
    }
    size_t n = strlen(s);
    if (n && s[n - 1] == '\r') s[n - 1] = '\0';
    return s;
}

/* A number at *p of digits only (base 10 or 16, no sign, no blanks before
 * it) that fits 64 bits; *p moves past it. */
static int read_u64(const char **p, int base, uint64_t *v) {
    if (!(base == 16 ? isxdigit((unsigned char)**p) : isdigit((unsigned char)**p))) return 0;
    char *end;
    errno = 0;
    *v = strtoull(*p, &end, base);
    *p = end;
    return errno == 0;
}

/* "KEY NUMBER" (base) or "KEY NUMBER HEX" (hex given) and nothing else. */
static int header_line(const char *s, const char *key, int base, uint64_t *value, uint64_t *hex) {
    size_t k = strlen(key);
    if (strncmp(s, key, k) != 0 || s[k] != ' ') return 0;
    const char *p = s + k + 1;
    if (!read_u64(&p, base, value)) return 0;
    if (hex && (*p++ != ' ' || !read_u64(&p, 16, hex))) return 0;
    return *p == '\0';
}

/* The first line: RR_MAGIC (want_cells 0) or RR_CELLS_MAGIC (1). */
static pk_status check_magic(pk_context *ctx, const char *path, const char *s, int want_cells) {
    const char *want = want_cells ? RR_CELLS_MAGIC : RR_MAGIC, *other = want_cells ? RR_MAGIC : RR_CELLS_MAGIC;
    if (s && strcmp(s, want) == 0) return PK_OK;
    if (s && strcmp(s, other) == 0)
        return pk_fail(ctx, PK_ERR_PARSE,
                       want_cells ? "%s:1: these are plain RR counts (of a run without random weights, --mean-theta "
                                    "or --jackknife); this run needs the RR of a run with the same random weights, "
                                    "--jackknife and --mean-theta"
                                  : "%s:1: these are the RR counts of a run with random weights, --mean-theta or "
                                    "--jackknife; this run has none of them and needs plain RR counts",
                       path);
    return pk_fail(ctx, PK_ERR_PARSE, "%s:1: not a pairkit RR file (--save-rr writes them; they start with '%s')", path,
                   want);
}

/* "random N HASH" against the random catalog. */
static pk_status check_random(pk_context *ctx, const char *path, size_t line, const char *s, const pk_catalog *random) {
    uint64_t n_obj, hash;
    if (!s || !header_line(s, "random", 10, &n_obj, &hash))
        return pk_fail(ctx, PK_ERR_PARSE, "%s:%zu: expected 'random N HASH'", path, line);
    if (n_obj != random->n)
        return pk_fail(ctx, PK_ERR_PARSE,
                       "%s:%zu: these RR counts are of a random catalog of %llu objects; this run's has %zu", path,
                       line, (unsigned long long)n_obj, random->n);
    if (hash != catalog_hash(random))
        return pk_fail(ctx, PK_ERR_PARSE,
                       "%s:%zu: these RR counts are of another random catalog of %zu objects (other coordinates, "
                       "order or units)",
                       path, line, random->n);
    return PK_OK;
}

/* "bins B" against the bins. */
static pk_status check_n_bins(pk_context *ctx, const char *path, size_t line, const char *s, const pk_bins *bins) {
    uint64_t n_bins;
    if (!s || !header_line(s, "bins", 10, &n_bins, NULL))
        return pk_fail(ctx, PK_ERR_PARSE, "%s:%zu: expected 'bins B'", path, line);
    if (n_bins != bins->n_bins)
        return pk_fail(ctx, PK_ERR_PARSE, "%s:%zu: %llu bins in the file, %zu in this run", path, line,
                       (unsigned long long)n_bins, bins->n_bins);
    return PK_OK;
}

/* Bin k's edges as read against the run's. */
static pk_status check_edges(pk_context *ctx, const char *path, size_t line, size_t k, double lo, double hi,
                             const pk_bins *bins) {
    if (lo == bins->edges[k] && hi == bins->edges[k + 1]) return PK_OK;
    return pk_fail(ctx, PK_ERR_PARSE,
                   "%s:%zu: bin %zu is [%.17g, %.17g) rad in the file, [%.17g, %.17g) rad in this run (%.10g "
                   "to %.10g degrees)",
                   path, line, k, lo, hi, bins->edges[k], bins->edges[k + 1], bins->edges[k] * (180.0 / M_PI),
                   bins->edges[k + 1] * (180.0 / M_PI));
}

/* Only blank lines left after the last line the file needs. */
static pk_status check_rest(pk_context *ctx, const char *path, size_t line, char **p, const char *what) {
    char *s;
    while ((s = next_line(p))) {
        if (strspn(s, " \t") != strlen(s))
            return pk_fail(ctx, PK_ERR_PARSE, "%s:%zu: unexpected text after %s", path, line, what);
        line++;
    }
    return PK_OK;
}

static pk_status read_rr(pk_context *ctx, const char *path, char *text, const pk_catalog *random, const pk_bins *bins,
                         uint64_t *rr) {
    char *p = text, *s;
    size_t line = 1;
    pk_status st;
    if ((st = check_magic(ctx, path, next_line(&p), 0))) return st;
    line++;
    uint64_t sum;
    if ((st = check_random(ctx, path, line, next_line(&p), random))) return st;
    line++;
    if ((st = check_n_bins(ctx, path, line, next_line(&p), bins))) return st;
    line++;
    const size_t sum_line = line;
    if (!(s = next_line(&p)) || !header_line(s, "counts", 16, &sum, NULL))
        return pk_fail(ctx, PK_ERR_PARSE, "%s:%zu: expected 'counts SUM'", path, line);
    uint64_t total = 0;
    for (size_t k = 0; k < bins->n_bins; k++) {
        line++;
        if (!(s = next_line(&p)))
            return pk_fail(ctx, PK_ERR_PARSE, "%s:%zu: the file ends after %zu of its %zu bins", path, line, k,
                           bins->n_bins);
        char *end;
        errno = 0;
        double lo = pk_strtod(s, &end), hi = end != s ? pk_strtod(end, &end) : 0;
        const char *at = end;
        while (*at == ' ' || *at == '\t') at++;
        uint64_t c = 0;
        int ok = end != s && read_u64(&at, 10, &c);
        while (ok && (*at == ' ' || *at == '\t')) at++;
        if (!ok || *at != '\0')
            return pk_fail(ctx, PK_ERR_PARSE, "%s:%zu: expected 'LO HI RR' (two edges and a count)", path, line);
        if ((st = check_edges(ctx, path, line, k, lo, hi, bins))) return st;
        if (c > (uint64_t)random->n * random->n - total)
            return pk_fail(ctx, PK_ERR_PARSE, "%s:%zu: the counts add up to more than the %zu^2 pairs there are", path,
                           line, random->n);
        total += c;
        rr[k] = c;
    }
    if ((st = check_rest(ctx, path, line + 1, &p, "the bins"))) return st;
    if (counts_sum(rr, bins->n_bins) != sum)
        return pk_fail(ctx, PK_ERR_PARSE,
                       "%s:%zu: the counts do not match their checksum: the file was changed after it was written",
                       path, sum_line);
    return PK_OK;
}

pk_status pk_angcorr_read_rr(pk_context *ctx, const char *path, const pk_catalog *random, const pk_bins *bins,
                             uint64_t *rr) {
    pk_clear(ctx);
    pk_status st = rr_arguments(ctx, __func__, path, random, bins, rr, "rr");
    if (st) return st;
    char *text;
    size_t size;
    if ((st = pk_read_file(ctx, path, &text, &size)) != PK_OK) return st;
    if (memchr(text, '\0', size)) st = pk_fail(ctx, PK_ERR_PARSE, "%s: not a text file", path);
    else st = read_rr(ctx, path, text, random, bins, rr);
    free(text);
    return st;
}

/* ---- the RR cells of runs with weights, mean separations or patches ------- */

/* What keys a file of cells: the random weights' hash (FNV_START for
 * none), the patch count and the hash of the randoms' patch numbers. */
typedef struct cells_key {
    int weighted;
    uint64_t weights_hash;
    int k;
    uint64_t patches_hash;
} cells_key;

static pk_status cells_key_make(pk_context *ctx, const pk_catalog *random, const pk_angcorr_run_options *run,
                                cells_key *key) {
    key->weighted = run->weights_random != NULL;
    key->weights_hash = key->weighted ? doubles_hash(run->weights_random, random->n) : FNV_START;
    key->k = run->jackknife >= 2 ? run->jackknife : 1;
    key->patches_hash = FNV_START;
    if (key->k == 1) return PK_OK;
    int32_t *patch = malloc((random->n ? random->n : 1) * sizeof(int32_t));
    if (!patch) return pk_fail(ctx, PK_ERR_NOMEM, "out of memory for the randoms' patches");
    pk_status st = pk_angcorr_patches(ctx, random, key->k, random, patch);
    for (size_t i = 0; st == PK_OK && i < random->n; i++)
        key->patches_hash = fnv_step(key->patches_hash, (uint64_t)patch[i]);
    free(patch);
    return st;
}

static size_t cell_at(int k, int p, int q, size_t n_bins, size_t b) {
    return ((size_t)p * (size_t)k + (size_t)q) * n_bins + b;
}

static uint64_t double_bits(double x) {
    uint64_t b;
    memcpy(&b, &x, sizeof b);
    return b;
}

/* Over the numbers of the cell lines, in file order. */
static uint64_t cells_sum(const pk_angcorr_rr_cells *c) {
    uint64_t h = FNV_START;
    for (int p = 0; p < c->n_patches; p++)
        for (int q = p; q < c->n_patches; q++)
            for (size_t b = 0; b < c->n_bins; b++) {
                size_t i = cell_at(c->n_patches, p, q, c->n_bins, b);
                h = fnv_step(fnv_step(h, c->counts[i]), double_bits(c->weighted[i]));
                if (c->theta_sum) h = fnv_step(h, double_bits(c->theta_sum[i]));
            }
    return h;
}

/* NULL run options: the defaults, as pk_angcorr_run_ex_rr takes them. */
static const pk_angcorr_run_options *run_or_default(const pk_angcorr_run_options *run) {
    static const pk_angcorr_run_options none = {NULL, NULL, 0, 0, PK_PRUNE_AUTO};
    return run ? run : &none;
}

pk_status pk_angcorr_write_rr_cells(pk_context *ctx, const char *path, const pk_catalog *random,
                                    const pk_angcorr_run_options *run, const pk_bins *bins,
                                    const pk_angcorr_rr_cells *cells) {
    pk_clear(ctx);
    pk_status st = rr_arguments(ctx, __func__, path, random, bins, cells, "cells");
    if (st) return st;
    run = run_or_default(run);
    cells_key key;
    if ((st = cells_key_make(ctx, random, run, &key)) != PK_OK) return st;
    if (cells->n_patches != key.k || cells->n_bins != bins->n_bins || !cells->counts || !cells->weighted ||
        !cells->theta_sum != !run->mean_theta)
        return pk_fail(ctx, PK_ERR_INVALID, "%s: the RR cells are not of this run's patches, bins or mean_theta", path);
    if (key.k == 1 && !key.weighted && !run->mean_theta) /* RR is the plain counts */
        return pk_angcorr_write_rr(ctx, path, random, bins, cells->counts);
    pk_atomic_file f;
    if ((st = pk_atomic_open(ctx, &f, path))) return st;
    fprintf(f.fp, "%s\nrandom %zu %016" PRIx64 "\n", RR_CELLS_MAGIC, random->n, catalog_hash(random));
    if (key.weighted) fprintf(f.fp, "weights %016" PRIx64 "\n", key.weights_hash);
    else fprintf(f.fp, "weights none\n");
    fprintf(f.fp, "patches %d %016" PRIx64 "\nmean-theta %d\nbins %zu\ncounts %016" PRIx64 "\n", key.k,
            key.patches_hash, run->mean_theta ? 1 : 0, bins->n_bins, cells_sum(cells));
    for (size_t b = 0; b < bins->n_bins; b++) fprintf(f.fp, "%.17g %.17g\n", bins->edges[b], bins->edges[b + 1]);
    for (int p = 0; p < key.k; p++)
        for (int q = p; q < key.k; q++)
            for (size_t b = 0; b < bins->n_bins; b++) {
                size_t i = cell_at(key.k, p, q, bins->n_bins, b);
                fprintf(f.fp, "%d %d %zu %" PRIu64 " %.17g", p, q, b, cells->counts[i], cells->weighted[i]);
                if (cells->theta_sum) fprintf(f.fp, " %.17g", cells->theta_sum[i]);
                fputc('\n', f.fp);
            }
    return pk_atomic_commit(ctx, &f);
}

/* A finite double at *p after blanks; *p moves past it. */
static int read_double(const char **p, double *v) {
    while (**p == ' ' || **p == '\t') (*p)++;
    char *end;
    *v = pk_strtod(*p, &end);
    if (end == *p || !isfinite(*v)) return 0;
    *p = end;
    return 1;
}

/* An unsigned decimal at *p after blanks. */
static int read_count(const char **p, uint64_t *v) {
    while (**p == ' ' || **p == '\t') (*p)++;
    return read_u64(p, 10, v);
}

static pk_status read_cells(pk_context *ctx, const char *path, char *text, const pk_catalog *random,
                            const pk_angcorr_run_options *run, const pk_bins *bins, pk_angcorr_rr_cells *out) {
    char *p = text, *s;
    size_t line = 1;
    pk_status st;
    cells_key key;
    if ((st = cells_key_make(ctx, random, run, &key))) return st;
    if (key.k == 1 && !key.weighted && !run->mean_theta && strncmp(text, RR_MAGIC, strlen(RR_MAGIC)) == 0 &&
        strchr("\r\n", text[strlen(RR_MAGIC)])) {
        /* RR is the plain counts: a plain file serves */
        pk_angcorr_rr_cells c = {1, bins->n_bins, malloc(bins->n_bins * sizeof(uint64_t)),
                                 malloc(bins->n_bins * sizeof(double)), NULL};
        st = c.counts && c.weighted ? read_rr(ctx, path, text, random, bins, c.counts)
                                    : pk_fail(ctx, PK_ERR_NOMEM, "out of memory for %s's RR", path);
        for (size_t b = 0; st == PK_OK && b < bins->n_bins; b++) c.weighted[b] = (double)c.counts[b];
        if (st) pk_angcorr_rr_cells_free(&c);
        else *out = c;
        return st;
    }
    if ((st = check_magic(ctx, path, next_line(&p), 1))) return st;
    line++;
    if ((st = check_random(ctx, path, line, next_line(&p), random))) return st;
    line++;
    uint64_t v, hash;
    s = next_line(&p);
    int none = s && strcmp(s, "weights none") == 0;
    if (!s || (!none && !header_line(s, "weights", 16, &hash, NULL)))
        return pk_fail(ctx, PK_ERR_PARSE, "%s:%zu: expected 'weights none' or 'weights HASH'", path, line);
    if (none != !key.weighted)
        return pk_fail(ctx, PK_ERR_PARSE, "%s:%zu: the RR in the file was counted %s random weights; this run has %s",
                       path, line, none ? "without" : "with", none ? "them" : "no random weights");
    if (!none && hash != key.weights_hash)
        return pk_fail(ctx, PK_ERR_PARSE, "%s:%zu: the RR in the file was counted with other random weights", path,
                       line);
    line++;
    if (!(s = next_line(&p)) || !header_line(s, "patches", 10, &v, &hash) || v < 1 || v > INT32_MAX)
        return pk_fail(ctx, PK_ERR_PARSE, "%s:%zu: expected 'patches K HASH'", path, line);
    if ((int)v != key.k) {
        char file_k[48], run_k[48];
        snprintf(file_k, sizeof file_k, v == 1 ? "a run without --jackknife" : "--jackknife %llu",
                 (unsigned long long)v);
        snprintf(run_k, sizeof run_k, key.k == 1 ? "no --jackknife" : "--jackknife %d", key.k);
        return pk_fail(ctx, PK_ERR_PARSE, "%s:%zu: the RR in the file is of %s; this run has %s", path, line, file_k,
                       run_k);
    }
    if (hash != key.patches_hash)
        return pk_fail(ctx, PK_ERR_PARSE,
                       "%s:%zu: the random catalog's %d patches differ from those of the RR in the file (another "
                       "version of the patch rule)",
                       path, line, key.k);
    line++;
    if (!(s = next_line(&p)) || !header_line(s, "mean-theta", 10, &v, NULL) || v > 1)
        return pk_fail(ctx, PK_ERR_PARSE, "%s:%zu: expected 'mean-theta 0' or 'mean-theta 1'", path, line);
    if ((int)v != (run->mean_theta ? 1 : 0))
        return pk_fail(ctx, PK_ERR_PARSE, "%s:%zu: the RR in the file was counted %s --mean-theta; this run %s", path,
                       line, v ? "with" : "without", v ? "does not ask for it" : "asks for it");
    line++;
    if ((st = check_n_bins(ctx, path, line, next_line(&p), bins))) return st;
    line++;
    const size_t sum_line = line;
    uint64_t sum;
    if (!(s = next_line(&p)) || !header_line(s, "counts", 16, &sum, NULL))
        return pk_fail(ctx, PK_ERR_PARSE, "%s:%zu: expected 'counts SUM'", path, line);
    const size_t nb = bins->n_bins;
    for (size_t b = 0; b < nb; b++) {
        line++;
        double lo, hi;
        const char *at = s = next_line(&p);
        if (!s || !read_double(&at, &lo) || !read_double(&at, &hi) || at[strspn(at, " \t")] != '\0')
            return pk_fail(ctx, PK_ERR_PARSE, "%s:%zu: expected 'LO HI' (the edges of bin %zu)", path, line, b);
        if ((st = check_edges(ctx, path, line, b, lo, hi, bins))) return st;
    }
    const int k = key.k;
    const size_t cells = (size_t)k * (size_t)k * nb;
    pk_angcorr_rr_cells c = {k, nb, malloc(cells * sizeof(uint64_t)), malloc(cells * sizeof(double)),
                             run->mean_theta ? malloc(cells * sizeof(double)) : NULL};
    if (!c.counts || !c.weighted || (run->mean_theta && !c.theta_sum)) {
        pk_angcorr_rr_cells_free(&c);
        return pk_fail(ctx, PK_ERR_NOMEM, "out of memory for %s's RR cells", path);
    }
    const uint64_t pairs = (uint64_t)random->n * random->n;
    uint64_t total = 0;
    for (int pp = 0; pp < k && st == PK_OK; pp++)
        for (int q = pp; q < k && st == PK_OK; q++)
            for (size_t b = 0; b < nb && st == PK_OK; b++) {
                line++;
                uint64_t fp, fq, fb, cnt;
                double w, t = 0;
                const char *at = s = next_line(&p);
                int ok = s && read_count(&at, &fp) && read_count(&at, &fq) && read_count(&at, &fb) &&
                         read_count(&at, &cnt) && read_double(&at, &w) && (!run->mean_theta || read_double(&at, &t));
                if (!s) {
                    st = pk_fail(ctx, PK_ERR_PARSE, "%s:%zu: the file ends before cell (%d, %d) bin %zu", path, line,
                                 pp, q, b);
                } else if (!ok || at[strspn(at, " \t")] != '\0') {
                    st = pk_fail(ctx, PK_ERR_PARSE, "%s:%zu: expected 'P Q BIN RR W%s'", path, line,
                                 run->mean_theta ? " T" : "");
                } else if (fp != (uint64_t)pp || fq != (uint64_t)q || fb != b) {
                    st = pk_fail(ctx, PK_ERR_PARSE,
                                 "%s:%zu: expected cell (%d, %d) bin %zu here, found (%llu, %llu) "
                                 "bin %llu",
                                 path, line, pp, q, b, (unsigned long long)fp, (unsigned long long)fq,
                                 (unsigned long long)fb);
                } else {
                    uint64_t both = pp == q ? cnt : 2 * cnt;
                    if (cnt > pairs || both > pairs - total) {
                        st = pk_fail(ctx, PK_ERR_PARSE,
                                     "%s:%zu: the counts add up to more than the %zu^2 pairs there "
                                     "are",
                                     path, line, random->n);
                        break;
                    }
                    total += both;
                    size_t i = cell_at(k, pp, q, nb, b), j = cell_at(k, q, pp, nb, b);
                    c.counts[i] = c.counts[j] = cnt;
                    c.weighted[i] = c.weighted[j] = w;
                    if (c.theta_sum) c.theta_sum[i] = c.theta_sum[j] = t;
                }
            }
    if (st == PK_OK) st = check_rest(ctx, path, line + 1, &p, "the last cell");
    if (st == PK_OK && cells_sum(&c) != sum)
        st = pk_fail(ctx, PK_ERR_PARSE,
                     "%s:%zu: the counts do not match their checksum: the file was changed after it was written", path,
                     sum_line);
    if (st) pk_angcorr_rr_cells_free(&c);
    else *out = c;
    return st;
}

pk_status pk_angcorr_read_rr_cells(pk_context *ctx, const char *path, const pk_catalog *random,
                                   const pk_angcorr_run_options *run, const pk_bins *bins, pk_angcorr_rr_cells *out) {
    pk_clear(ctx);
    pk_status st = rr_arguments(ctx, __func__, path, random, bins, out, "out");
    if (st) return st;
    memset(out, 0, sizeof *out);
    run = run_or_default(run);
    char *text;
    size_t size;
    if ((st = pk_read_file(ctx, path, &text, &size)) != PK_OK) return st;
    if (memchr(text, '\0', size)) st = pk_fail(ctx, PK_ERR_PARSE, "%s: not a text file", path);
    else st = read_cells(ctx, path, text, random, run, bins, out);
    free(text);
    return st;
}
