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
 * Reading checks every field against the random catalog and bins of the
 * run, and the counts against their checksum, so that counts of another
 * catalog or other bins, or counts edited since, are refused, with the
 * file, the line and what differs.
 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "angcorr_internal.h"

#define RR_MAGIC "pairkit-rr 1"

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

/* Over the counts. */
static uint64_t counts_sum(const uint64_t *rr, size_t n) {
    uint64_t h = FNV_START;
    for (size_t k = 0; k < n; k++) h = fnv_step(h, rr[k]);
    return h;
}

pk_status pk_angcorr_write_rr(pk_context *ctx, const char *path, const pk_catalog *random, const pk_bins *bins,
                              const uint64_t *rr) {
    pk_clear(ctx);
    pk_atomic_file f;
    pk_status st = pk_atomic_open(ctx, &f, path);
    if (st) return st;
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

static pk_status read_rr(pk_context *ctx, const char *path, char *text, const pk_catalog *random, const pk_bins *bins,
                         uint64_t *rr) {
    char *p = text, *s;
    size_t line = 1;
    if (!(s = next_line(&p)) || strcmp(s, RR_MAGIC) != 0)
        return pk_fail(ctx, PK_ERR_PARSE, "%s:1: not a pairkit RR file (--save-rr writes them; they start with '%s')",
                       path, RR_MAGIC);
    line++;
    uint64_t n_obj, hash, n_bins, sum;
    if (!(s = next_line(&p)) || !header_line(s, "random", 10, &n_obj, &hash))
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
    line++;
    if (!(s = next_line(&p)) || !header_line(s, "bins", 10, &n_bins, NULL))
        return pk_fail(ctx, PK_ERR_PARSE, "%s:%zu: expected 'bins B'", path, line);
    if (n_bins != bins->n_bins)
        return pk_fail(ctx, PK_ERR_PARSE, "%s:%zu: %llu bins in the file, %zu in this run", path, line,
                       (unsigned long long)n_bins, bins->n_bins);
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
        double lo = strtod(s, &end), hi = end != s ? strtod(end, &end) : 0;
        const char *at = end;
        while (*at == ' ' || *at == '\t') at++;
        uint64_t c = 0;
        int ok = end != s && read_u64(&at, 10, &c);
        while (ok && (*at == ' ' || *at == '\t')) at++;
        if (!ok || *at != '\0')
            return pk_fail(ctx, PK_ERR_PARSE, "%s:%zu: expected 'LO HI RR' (two edges and a count)", path, line);
        if (lo != bins->edges[k] || hi != bins->edges[k + 1])
            return pk_fail(ctx, PK_ERR_PARSE,
                           "%s:%zu: bin %zu is [%.17g, %.17g) rad in the file, [%.17g, %.17g) rad in this run (%.10g "
                           "to %.10g degrees)",
                           path, line, k, lo, hi, bins->edges[k], bins->edges[k + 1], bins->edges[k] * (180.0 / M_PI),
                           bins->edges[k + 1] * (180.0 / M_PI));
        if (c > (uint64_t)random->n * random->n - total)
            return pk_fail(ctx, PK_ERR_PARSE, "%s:%zu: the counts add up to more than the %zu^2 pairs there are", path,
                           line, random->n);
        total += c;
        rr[k] = c;
    }
    line++;
    while ((s = next_line(&p))) {
        if (strspn(s, " \t") != strlen(s))
            return pk_fail(ctx, PK_ERR_PARSE, "%s:%zu: unexpected text after the %zu bins", path, line, bins->n_bins);
        line++;
    }
    if (counts_sum(rr, bins->n_bins) != sum)
        return pk_fail(ctx, PK_ERR_PARSE,
                       "%s:%zu: the counts do not match their checksum: the file was changed after it was written",
                       path, sum_line);
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
