/* rr_file.c - a random catalog's RR counts kept in a file, for runs of other
 * data catalogs against the same random catalog and bins.
 *
 * The file (text, docs/angcorr.md):
 *
 *   pairkit-rr 1
 *   random N HASH          N objects; HASH: FNV-1a 64 of their (ra, dec) doubles
 *   bins B
 *   LO HI RR               B lines: edges in radians (%.17g, exact on reading), count
 *
 * Reading checks every field against the random catalog and bins of the
 * run, so that counts of another catalog or other bins are refused, with
 * the file, the line and what differs.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "angcorr_internal.h"

#define RR_MAGIC "pairkit-rr 1"

/* FNV-1a over the bytes of the catalog's coordinates, RA then Dec of each
 * object: any change to an object, or to their order, changes it. */
static uint64_t catalog_hash(const pk_catalog *c) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < c->n; i++) {
        double v[2] = {c->ra[i], c->dec[i]};
        const unsigned char *b = (const unsigned char *)v;
        for (size_t k = 0; k < sizeof v; k++) h = (h ^ b[k]) * 0x100000001b3ull;
    }
    return h;
}

pk_status pk_angcorr_write_rr(pk_context *ctx, const char *path, const pk_catalog *random, const pk_bins *bins,
                              const uint64_t *rr) {
    pk_clear(ctx);
    pk_atomic_file f;
    pk_status st = pk_atomic_open(ctx, &f, path);
    if (st) return st;
    fprintf(f.fp, "%s\nrandom %zu %016" PRIx64 "\nbins %zu\n", RR_MAGIC, random->n, catalog_hash(random), bins->n_bins);
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

static pk_status read_rr(pk_context *ctx, const char *path, char *text, const pk_catalog *random, const pk_bins *bins,
                         uint64_t *rr) {
    char *p = text, *s;
    size_t line = 1;
    if (!(s = next_line(&p)) || strcmp(s, RR_MAGIC) != 0)
        return pk_fail(ctx, PK_ERR_PARSE, "%s:1: not a pairkit RR file (it starts with '%s', written by --save-rr)",
                       path, RR_MAGIC);
    line++;
    size_t n_obj;
    uint64_t hash;
    char tail;
    if (!(s = next_line(&p)) || sscanf(s, "random %zu %" SCNx64 " %c", &n_obj, &hash, &tail) != 2)
        return pk_fail(ctx, PK_ERR_PARSE, "%s:%zu: expected 'random N HASH'", path, line);
    if (n_obj != random->n)
        return pk_fail(ctx, PK_ERR_INVALID,
                       "%s:%zu: these RR counts are of a random catalog of %zu objects; this run's has %zu", path, line,
                       n_obj, random->n);
    if (hash != catalog_hash(random))
        return pk_fail(ctx, PK_ERR_INVALID,
                       "%s:%zu: these RR counts are of another random catalog of %zu objects (other coordinates, "
                       "order or units)",
                       path, line, n_obj);
    line++;
    size_t n_bins;
    if (!(s = next_line(&p)) || sscanf(s, "bins %zu %c", &n_bins, &tail) != 1)
        return pk_fail(ctx, PK_ERR_PARSE, "%s:%zu: expected 'bins B'", path, line);
    if (n_bins != bins->n_bins)
        return pk_fail(ctx, PK_ERR_INVALID, "%s:%zu: %zu bins in the file, %zu in this run", path, line, n_bins,
                       bins->n_bins);
    uint64_t total = 0;
    for (size_t k = 0; k < n_bins; k++) {
        line++;
        if (!(s = next_line(&p)))
            return pk_fail(ctx, PK_ERR_PARSE, "%s:%zu: the file ends after %zu of its %zu bins", path, line, k, n_bins);
        char *end;
        errno = 0;
        double lo = strtod(s, &end), hi = end != s ? strtod(end, &end) : 0;
        char *count_at = end;
        while (*count_at == ' ' || *count_at == '\t') count_at++;
        uint64_t c = 0;
        int ok = end != s && *count_at >= '0' && *count_at <= '9';
        if (ok) {
            c = strtoull(count_at, &end, 10);
            while (*end == ' ' || *end == '\t') end++;
            ok = errno == 0 && *end == '\0';
        }
        if (!ok) return pk_fail(ctx, PK_ERR_PARSE, "%s:%zu: expected 'LO HI RR' (two edges and a count)", path, line);
        if (lo != bins->edges[k] || hi != bins->edges[k + 1])
            return pk_fail(ctx, PK_ERR_INVALID,
                           "%s:%zu: bin %zu is [%.10g, %.10g) degrees in the file, [%.10g, %.10g) in this run", path,
                           line, k, lo * (180.0 / M_PI), hi * (180.0 / M_PI), bins->edges[k] * (180.0 / M_PI),
                           bins->edges[k + 1] * (180.0 / M_PI));
        if (c > (uint64_t)random->n * random->n - total)
            return pk_fail(ctx, PK_ERR_INVALID, "%s:%zu: the counts add up to more than the %zu^2 pairs there are",
                           path, line, random->n);
        total += c;
        rr[k] = c;
    }
    line++;
    while ((s = next_line(&p))) {
        if (strspn(s, " \t") != strlen(s))
            return pk_fail(ctx, PK_ERR_PARSE, "%s:%zu: unexpected text after the %zu bins", path, line, n_bins);
        line++;
    }
    return PK_OK;
}

pk_status pk_angcorr_read_rr(pk_context *ctx, const char *path, const pk_catalog *random, const pk_bins *bins,
                             uint64_t *rr) {
    pk_clear(ctx);
    char *text;
    size_t size;
    pk_status st = pk_read_file(ctx, path, &text, &size);
    if (st) return st;
    if (memchr(text, '\0', size)) st = pk_fail(ctx, PK_ERR_PARSE, "%s: not a text file", path);
    else st = read_rr(ctx, path, text, random, bins, rr);
    free(text);
    return st;
}
