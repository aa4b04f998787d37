/* read.c - memsort.bin read back (layout in docs/memsort.md), the header,
 * the region table and each instance checked against one another (the
 * values, trace positions, are not), so that a worker can fill its
 * instances from another run's plans (pairkit memsort-fill).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "memsort_internal.h"

static uint32_t get_u32(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t get_u64(const unsigned char *p) {
    return get_u32(p) | (uint64_t)get_u32(p + 4) << 32;
}

typedef struct reader {
    pk_context *ctx;
    const char *path;
    FILE *fp;
    uint64_t at, size; /* bytes read so far, the file's size */
} reader;

/* n bytes of the section `what` into buf; the file cut short names the
 * section and the bytes it needs. */
static pk_status read_bytes(reader *r, void *buf, uint64_t n, const char *what) {
    if (r->at + n > r->size) {
        const char *verb = what[strlen(what) - 1] == 's' ? "take" : "takes"; /* "the runs take", "the header takes" */
        return pk_fail(r->ctx, PK_ERR_PARSE, "%s: cut short: the %s %s bytes %llu .. %llu, the file has %llu", r->path,
                       what, verb, (unsigned long long)r->at, (unsigned long long)(r->at + n),
                       (unsigned long long)r->size);
    }
    if (n && fread(buf, 1, (size_t)n, r->fp) != n)
        return pk_fail(r->ctx, PK_ERR_IO, "%s: read failed in the %s: %s", r->path, what,
                       ferror(r->fp) ? strerror(errno) : "the file ended early");
    r->at += n;
    return PK_OK;
}

/* The padding to the next multiple of 8 (zero bytes). */
static pk_status skip_padding(reader *r, const char *what) {
    unsigned char pad[8] = {0}, zero[8] = {0};
    uint64_t n = (8 - r->at % 8) % 8;
    pk_status st = read_bytes(r, pad, n, what);
    if (st == PK_OK && memcmp(pad, zero, sizeof pad) != 0)
        st = pk_fail(r->ctx, PK_ERR_PARSE, "%s: the padding after the %s is not zero", r->path, what);
    return st;
}

/* n u32 values into v, little-endian in the file. */
static pk_status read_u32s(reader *r, uint32_t *v, uint64_t n, const char *what) {
    pk_status st = read_bytes(r, v, n * 4, what);
    const uint16_t one = 1;
    if (st == PK_OK && *(const uint8_t *)&one != 1)
        for (uint64_t i = 0; i < n; i++) v[i] = get_u32((const unsigned char *)&v[i]);
    return st;
}

const char *pk_memsort_plan_disagrees(const uint64_t *chunk_start, uint32_t n_chunks, const pk_memsort_instance *in,
                                      const uint32_t *pos, size_t stride, uint32_t last_count,
                                      const pk_memsort_instance *prev, const uint32_t *prev_pos,
                                      uint32_t prev_last_count) {
    uint32_t n = in->n_rows, in_last_chunk = 0;
    for (uint32_t k = n - last_count; k < n; k++) in_last_chunk += pos[k * stride] >= chunk_start[in->last_chunk];
    if (pk_memsort_chunk_at(chunk_start, n_chunks, pos[0]) != in->first_chunk) return "first_chunk";
    if (pk_memsort_chunk_at(chunk_start, n_chunks, pos[(size_t)(n - 1) * stride]) != in->last_chunk)
        return "last_chunk";
    if (last_count != in->last_include_total) return "last_include_total";
    if (in_last_chunk != in->last_include) return "last_include";
    if (!prev) return NULL;
    uint64_t skip = 0;
    if (prev->last_addr == in->first_addr) {
        for (uint32_t k = prev->n_rows - prev_last_count; k < prev->n_rows; k++)
            skip += pk_memsort_chunk_at(chunk_start, n_chunks, prev_pos[k * stride]) == in->first_chunk;
        if (prev->first_addr == prev->last_addr && prev->first_chunk == in->first_chunk) skip += prev->first_skip;
    }
    if (in->prev_value != prev_pos[(size_t)(prev->n_rows - 1) * stride]) return "prev_value";
    if (in->first_skip != skip) return "first_skip";
    return NULL;
}

/* An owned instance's values (trace positions): each a position of the
 * trace, rising within a run (the order is stable); then the plan fields
 * they fix (pk_memsort_plan_disagrees), prev_value and first_skip where
 * the previous instance of the region is owned too. The chunk table,
 * chunk counts and runs are read and checked by then. */
static pk_status check_values(pk_context *ctx, const char *path, const pk_memsort_result *res, uint32_t g) {
    const pk_memsort_instance *in = &res->instances[g];
    const pk_memsort_run_entry *run = res->runs + in->runs_offset;
    const uint32_t *v = res->values + in->values_offset;
    uint64_t n_entries = res->chunk_start[res->n_chunks];
    uint64_t j = 0;
    for (uint32_t r = 0; r < in->n_runs; r++)
        for (uint32_t k = 0; k < run[r].count; k++, j++)
            if (v[j] >= n_entries || (k > 0 && v[j] <= v[j - 1]))
                return pk_fail(ctx, PK_ERR_PARSE, "%s: instance %u: value %llu (%u, of run %u) is %s", path, g,
                               (unsigned long long)j, v[j], r,
                               v[j] >= n_entries ? "past the trace's end" : "not after the value before it");
    const pk_memsort_instance *prev = in->index > 0 && in[-1].owned ? in - 1 : NULL;
    const char *field = pk_memsort_plan_disagrees(res->chunk_start, res->n_chunks, in, v, 1, run[in->n_runs - 1].count,
                                                  prev, prev ? res->values + prev->values_offset : NULL,
                                                  prev ? res->runs[prev->runs_offset + prev->n_runs - 1].count : 0);
    if (field)
        return pk_fail(ctx, PK_ERR_PARSE, "%s: instance %u: field %s does not agree with its rows%s", path, g, field,
                       strcmp(field, "prev_value") == 0   ? " (the previous instance's last value)"
                       : strcmp(field, "first_skip") == 0 ? " and the previous instance's"
                                                          : "");
    return PK_OK;
}

/* The header's counts, checked against one another and the file's size. */
typedef struct memsort_header {
    uint64_t n_entries, n_runs, n_values;
    uint32_t n_chunks, n_regions, n_instances, n_owned, n_workers, worker;
} memsort_header;

/* The next u32 or u64 of a record at *p (little-endian), *p moved past it:
 * a record read field by field in the order pk_memsort_write puts them. */
static uint32_t take_u32(const unsigned char **p) {
    uint32_t v = get_u32(*p);
    *p += 4;
    return v;
}

static uint64_t take_u64(const unsigned char **p) {
    uint64_t v = get_u64(*p);
    *p += 8;
    return v;
}

/* The file, or a folder's memsort.bin, open in r; *joined the folder's
 * path joined (the caller frees it). */
static pk_status open_memsort_bin(reader *r, char **joined) {
    char dir_buf[4096];
    struct stat sb;
    if (stat(r->path, &sb) == 0 && S_ISDIR(sb.st_mode)) { /* a folder: its memsort.bin */
        *joined = pk_memsort_join_path(pk_dir_name(r->path, dir_buf, sizeof dir_buf), "memsort.bin");
        if (!*joined) return pk_fail(r->ctx, PK_ERR_NOMEM, "out of memory");
        r->path = *joined;
    }
    r->fp = fopen(r->path, "rb");
    if (!r->fp) return pk_fail(r->ctx, PK_ERR_IO, "%s: cannot open: %s", r->path, strerror(errno));
    if (fstat(fileno(r->fp), &sb) != 0 || !S_ISREG(sb.st_mode))
        return pk_fail(r->ctx, PK_ERR_IO, "%s: not a regular file", r->path);
    r->size = (uint64_t)sb.st_size;
    return PK_OK;
}

/* The header's counts within their ranges and agreeing with one another. */
static pk_status check_header_counts(reader *r, const memsort_header *h) {
    pk_context *ctx = r->ctx;
    const char *path = r->path;
    if (h->n_entries >= (1ull << 32))
        return pk_fail(ctx, PK_ERR_PARSE, "%s: header field n_entries is %llu, at least 2^32", path,
                       (unsigned long long)h->n_entries);
    if (h->n_chunks < 1 || h->n_chunks > PK_MEMSORT_MAX_CHUNKS)
        return pk_fail(ctx, PK_ERR_PARSE, "%s: header field n_chunks is %u, not 1 .. %d", path, h->n_chunks,
                       PK_MEMSORT_MAX_CHUNKS);
    if (h->n_regions < 1 || h->n_regions > PK_MEMSORT_MAX_REGIONS)
        return pk_fail(ctx, PK_ERR_PARSE, "%s: header field n_regions is %u, not 1 .. %d", path, h->n_regions,
                       PK_MEMSORT_MAX_REGIONS);
    if (h->n_workers < 1 || h->worker >= h->n_workers)
        return pk_fail(ctx, PK_ERR_PARSE, "%s: header fields n_workers %u and worker %u: a worker below n_workers >= 1",
                       path, h->n_workers, h->worker);
    if (h->n_owned > h->n_instances)
        return pk_fail(ctx, PK_ERR_PARSE, "%s: header field n_owned is %u, more than the %u instances", path,
                       h->n_owned, h->n_instances);
    if (h->n_values > h->n_entries)
        return pk_fail(ctx, PK_ERR_PARSE, "%s: header field n_values is %llu, more than the %llu entries", path,
                       (unsigned long long)h->n_values, (unsigned long long)h->n_entries);
    if (h->n_runs > h->n_values)
        return pk_fail(ctx, PK_ERR_PARSE, "%s: header field n_runs is %llu, more than the %llu values", path,
                       (unsigned long long)h->n_runs, (unsigned long long)h->n_values);
    return PK_OK;
}

/* The header: magic, version and record sizes as this build writes them,
 * counts within their ranges and agreeing with one another, and the file
 * as long as the sections they announce, all before anything large is
 * allocated. */
static pk_status read_header(reader *r, memsort_header *h) {
    unsigned char x[PK_MEMSORT_BIN_HEADER_BYTES];
    pk_status st = read_bytes(r, x, sizeof x, "header");
    if (st) return st;
    if (memcmp(x, PK_MEMSORT_BIN_MAGIC, 8) != 0)
        return pk_fail(r->ctx, PK_ERR_PARSE, "%s: not a memsort.bin (it does not start with %s)", r->path,
                       PK_MEMSORT_BIN_MAGIC);
    const unsigned char *p = x + 8;
    uint32_t version = take_u32(&p), header_bytes = take_u32(&p);
    h->n_entries = take_u64(&p);
    h->n_chunks = take_u32(&p);
    h->n_regions = take_u32(&p);
    h->n_instances = take_u32(&p);
    h->n_owned = take_u32(&p);
    h->n_workers = take_u32(&p);
    h->worker = take_u32(&p);
    h->n_runs = take_u64(&p);
    h->n_values = take_u64(&p);
    uint32_t region_bytes = take_u32(&p), instance_bytes = take_u32(&p);
    if (version == 1)
        return pk_fail(r->ctx, PK_ERR_PARSE,
                       "%s: a memsort.bin of version 1, which holds no chunk table; run pairkit memsort again to "
                       "write version %u",
                       r->path, PK_MEMSORT_BIN_VERSION);
    if (version != PK_MEMSORT_BIN_VERSION)
        return pk_fail(r->ctx, PK_ERR_PARSE, "%s: header field version is %u; this build reads version %u", r->path,
                       version, PK_MEMSORT_BIN_VERSION);
    struct {
        const char *name;
        uint32_t got, want;
    } sizes[] = {{"header_bytes", header_bytes, PK_MEMSORT_BIN_HEADER_BYTES},
                 {"region_bytes", region_bytes, PK_MEMSORT_BIN_REGION_BYTES},
                 {"instance_bytes", instance_bytes, PK_MEMSORT_BIN_INSTANCE_BYTES}};
    for (int k = 0; k < 3; k++)
        if (sizes[k].got != sizes[k].want)
            return pk_fail(r->ctx, PK_ERR_PARSE, "%s: header field %s is %u, expected %u", r->path, sizes[k].name,
                           sizes[k].got, sizes[k].want);
    if ((st = check_header_counts(r, h)) != PK_OK) return st;
    /* the whole file's size, from the header alone, before anything large is allocated */
    uint64_t n_counts = (uint64_t)h->n_owned * h->n_chunks;
    uint64_t expect = PK_MEMSORT_BIN_HEADER_BYTES + (uint64_t)PK_MEMSORT_BIN_REGION_BYTES * h->n_regions +
                      8ull * (h->n_chunks + 1) + (uint64_t)PK_MEMSORT_BIN_INSTANCE_BYTES * h->n_instances +
                      4 * (n_counts + n_counts % 2) + 8 * h->n_runs + 4 * (h->n_values + h->n_values % 2);
    if (r->size != expect)
        return pk_fail(r->ctx, PK_ERR_PARSE, "%s: %s: %llu bytes, the header's sections take %llu", r->path,
                       r->size < expect ? "cut short" : "longer than its header says", (unsigned long long)r->size,
                       (unsigned long long)expect);
    return PK_OK;
}

/* The region table into regions, each region's entries into
 * region_entries; checked as pk_memsort_regions_check checks a table, and
 * the entries adding up to the header's n_entries. */
static pk_status read_regions(reader *r, const memsort_header *h, pk_memsort_regions *regions,
                              uint64_t *region_entries) {
    pk_context *ctx = r->ctx;
    const char *path = r->path;
    uint64_t entries_sum = 0;
    regions->n_regions = h->n_regions;
    for (uint32_t k = 0; k < h->n_regions; k++) {
        unsigned char x[PK_MEMSORT_BIN_REGION_BYTES];
        pk_status st = read_bytes(r, x, sizeof x, "regions");
        if (st) return st;
        const unsigned char *nul = memchr(x, 0, PK_MEMSORT_NAME_MAX);
        if (nul == NULL)
            return pk_fail(ctx, PK_ERR_PARSE, "%s: region %u: its name is not NUL-terminated within 16 bytes", path, k);
        for (const unsigned char *q = nul; q < x + PK_MEMSORT_NAME_MAX; q++)
            if (*q)
                return pk_fail(ctx, PK_ERR_PARSE, "%s: region %u: the bytes after its name's NUL are not zero", path,
                               k);
        pk_memsort_region *reg = &regions->region[k];
        memcpy(reg->name, x, PK_MEMSORT_NAME_MAX);
        const unsigned char *p = x + PK_MEMSORT_NAME_MAX;
        reg->base = take_u32(&p);
        reg->max_instances = take_u32(&p);
        reg->size = take_u64(&p);
        region_entries[k] = take_u64(&p);
        reg->instance_entries = take_u32(&p);
        uint32_t reserved = take_u32(&p);
        if (reserved != 0)
            return pk_fail(ctx, PK_ERR_PARSE, "%s: region %u: field reserved is %u, not 0", path, k, reserved);
        entries_sum += region_entries[k] < (1ull << 32) ? region_entries[k] : (1ull << 32);
    }
    if (pk_memsort_regions_check(ctx, regions) != PK_OK) {
        char msg[PK_MESSAGE_MAX];
        snprintf(msg, sizeof msg, "%s", ctx ? ctx->message : "");
        return pk_fail(ctx, PK_ERR_PARSE, "%s: its region table: %s", path, msg);
    }
    if (entries_sum != h->n_entries)
        return pk_fail(ctx, PK_ERR_PARSE, "%s: the regions' entries add up to %llu, the header says n_entries %llu",
                       path, (unsigned long long)entries_sum, (unsigned long long)h->n_entries);
    return PK_OK;
}

/* Room for the chunk table and the instances, which the header counts. */
static pk_status allocate_tables(reader *r, const memsort_header *h, pk_memsort_result *out) {
    out->chunk_start = malloc(((size_t)h->n_chunks + 1) * sizeof(uint64_t));
    out->instances = calloc((size_t)h->n_instances + 1, sizeof(pk_memsort_instance));
    if (!out->chunk_start || !out->instances)
        return pk_fail(r->ctx, PK_ERR_NOMEM, "%s: out of memory for %u instances", r->path, h->n_instances);
    return PK_OK;
}

/* The chunk table: from 0 up to n_entries without going back. */
static pk_status read_chunk_table(reader *r, const memsort_header *h, pk_memsort_result *out) {
    for (uint32_t c = 0; c <= h->n_chunks; c++) {
        unsigned char x[8];
        pk_status st = read_bytes(r, x, 8, "chunk table");
        if (st) return st;
        out->chunk_start[c] = get_u64(x);
        if ((c == 0 && out->chunk_start[0] != 0) || (c > 0 && out->chunk_start[c] < out->chunk_start[c - 1]) ||
            (c == h->n_chunks && out->chunk_start[c] != h->n_entries))
            return pk_fail(r->ctx, PK_ERR_PARSE,
                           "%s: chunk table entry %u is %llu: the table runs from 0 up to n_entries %llu without "
                           "going back",
                           r->path, c, (unsigned long long)out->chunk_start[c], (unsigned long long)h->n_entries);
    }
    return PK_OK;
}

/* What an instance record holds beside pk_memsort_instance's fields: the
 * reserved word, and the offsets of its runs and values in the file's
 * packing (the reader sets the instance's own). */
typedef struct instance_extra {
    uint32_t reserved;
    uint64_t runs_offset, values_offset;
} instance_extra;

/* One instance record, field by field in the order pk_memsort_write puts them. */
static void decode_instance(const unsigned char *x, pk_memsort_instance *in, instance_extra *extra) {
    const unsigned char *p = x;
    in->gid = take_u32(&p);
    in->region = take_u32(&p);
    in->index = take_u32(&p);
    in->owned = take_u32(&p);
    in->first_row = take_u64(&p);
    in->n_rows = take_u32(&p);
    in->first_addr = take_u32(&p);
    in->last_addr = take_u32(&p);
    in->first_chunk = take_u32(&p);
    in->first_skip = take_u32(&p);
    in->first_skip_total = take_u32(&p);
    in->last_chunk = take_u32(&p);
    in->last_include = take_u32(&p);
    in->last_include_total = take_u32(&p);
    in->has_prev = take_u32(&p);
    in->prev_addr = take_u32(&p);
    in->prev_value = take_u32(&p);
    in->n_runs = take_u32(&p);
    extra->reserved = take_u32(&p);
    extra->runs_offset = take_u64(&p);
    extra->values_offset = take_u64(&p);
}

/* Where an instance must sit: instance index of region region, global id
 * gid, after the owned instances before it hold run_at runs and value_at
 * values; prev the region's instance before it (NULL for index 0). */
typedef struct instance_place {
    uint32_t gid, region;
    uint64_t index, first_row, n_rows;
    int owned;
    const pk_memsort_region *reg;
    const pk_memsort_instance *prev;
    uint64_t run_at, value_at;
} instance_place;

/* The first field of instance in that does not agree with its place, the
 * header and the instances before it; NULL when all do. */
static const char *misplaced_field(const pk_memsort_instance *in, const instance_extra *extra, const instance_place *at,
                                   uint32_t n_chunks, const uint64_t *chunk_start) {
    const pk_memsort_region *reg = at->reg;
    const pk_memsort_instance *prev = at->prev;
    uint64_t i = at->index;
    /* the occurrences of the first address that earlier instances
     * hold: those of the previous instance (and of the ones before
     * it, when it holds that address alone) */
    uint64_t skip_before = 0;
    if (prev && in->first_addr == prev->last_addr)
        skip_before =
            (uint64_t)prev->last_include_total + (prev->first_addr == prev->last_addr ? prev->first_skip_total : 0);
    if (in->gid != at->gid) return "gid";
    if (in->region != at->region) return "region";
    if (in->index != i) return "index";
    if (in->owned != (uint32_t)at->owned) return "owned";
    if (in->first_row != at->first_row) return "first_row";
    if (in->n_rows != at->n_rows) return "n_rows";
    if (in->first_addr < reg->base || in->first_addr - reg->base >= reg->size || in->first_addr % 8)
        return "first_addr";
    if (in->last_addr < in->first_addr || in->last_addr - reg->base >= reg->size || in->last_addr % 8)
        return "last_addr";
    if (in->first_chunk >= n_chunks) return "first_chunk";
    if (in->last_chunk >= n_chunks) return "last_chunk";
    if (in->first_skip > in->first_skip_total) return "first_skip";
    if (in->last_include < 1 || in->last_include > in->last_include_total) return "last_include";
    if (in->last_include_total > in->n_rows) return "last_include_total";
    if (in->last_include_total != in->n_rows && in->first_addr == in->last_addr) return "last_include_total";
    if (in->last_include_total >= in->n_rows && in->first_addr != in->last_addr) return "last_include_total";
    if (in->has_prev != (i > 0)) return "has_prev";
    if (i == 0 && (in->prev_addr || in->prev_value)) return in->prev_addr ? "prev_addr" : "prev_value";
    if (i > 0 && in->prev_addr != prev->last_addr) return "prev_addr";
    if (i > 0 &&
        (in->prev_value < chunk_start[prev->last_chunk] || in->prev_value >= chunk_start[prev->last_chunk + 1]))
        return "prev_value"; /* the previous instance's last row lies in its last chunk */
    if (i > 0 && in->first_addr < prev->last_addr) return "first_addr";
    if (in->first_skip_total != skip_before) return "first_skip_total";
    if (i > 0 && in->first_addr == prev->last_addr && in->first_chunk < prev->last_chunk) return "first_chunk";
    if (extra->reserved != 0) return "reserved";
    if (in->owned && (in->n_runs < 1 || in->n_runs > in->n_rows)) return "n_runs";
    if (!in->owned && in->n_runs) return "n_runs";
    if (extra->runs_offset != (in->owned ? at->run_at : 0)) return "runs_offset";
    if (extra->values_offset != (in->owned ? at->value_at : 0)) return "values_offset";
    return NULL;
}

/* The instances, checked against the regions and one another: each
 * region's entries make its instances of instance_entries rows, the last
 * shorter; the owned ones' offsets into the runs, values and chunk counts
 * set. Then out takes the header's counts. */
static pk_status read_instances(reader *r, const memsort_header *h, const pk_memsort_regions *regions,
                                pk_memsort_result *out) {
    pk_context *ctx = r->ctx;
    const char *path = r->path;
    instance_place at = {0};
    uint32_t owned_seen = 0;
    for (uint32_t k = 0; k < h->n_regions; k++) {
        const pk_memsort_region *reg = &regions->region[k];
        uint64_t s = reg->instance_entries, entries = out->region_entries[k];
        uint64_t want = (entries + s - 1) / s;
        if (want > reg->max_instances)
            return pk_fail(ctx, PK_ERR_PARSE,
                           "%s: region %u (%s): %llu entries need %llu instances of %llu, more than its %u", path, k,
                           reg->name, (unsigned long long)entries, (unsigned long long)want, (unsigned long long)s,
                           reg->max_instances);
        for (uint64_t i = 0; i < want; i++, at.gid++) {
            unsigned char x[PK_MEMSORT_BIN_INSTANCE_BYTES];
            if (at.gid >= h->n_instances)
                return pk_fail(ctx, PK_ERR_PARSE, "%s: the regions' entries need more than the header's n_instances %u",
                               path, h->n_instances);
            pk_status st = read_bytes(r, x, sizeof x, "instances");
            if (st) return st;
            pk_memsort_instance *in = &out->instances[at.gid];
            instance_extra extra;
            decode_instance(x, in, &extra);
            at.region = k;
            at.index = i;
            at.first_row = i * s;
            at.n_rows = entries - i * s < s ? entries - i * s : s;
            at.owned = at.gid % h->n_workers == h->worker;
            at.reg = reg;
            at.prev = i > 0 ? in - 1 : NULL;
            const char *field = misplaced_field(in, &extra, &at, h->n_chunks, out->chunk_start);
            if (field)
                return pk_fail(ctx, PK_ERR_PARSE, "%s: instance %u: field %s is out of place (%s)", path, at.gid, field,
                               "it does not agree with the regions, the header or the instances before it");
            if (in->owned) {
                in->runs_offset = at.run_at;
                in->values_offset = at.value_at;
                in->counts_offset = (uint64_t)owned_seen * h->n_chunks;
                at.run_at += in->n_runs;
                at.value_at += in->n_rows;
                owned_seen++;
            }
        }
    }
    if (at.gid != h->n_instances)
        return pk_fail(ctx, PK_ERR_PARSE, "%s: header field n_instances is %u, the regions' entries make %u", path,
                       h->n_instances, at.gid);
    if (owned_seen != h->n_owned || at.run_at != h->n_runs || at.value_at != h->n_values)
        return pk_fail(ctx, PK_ERR_PARSE,
                       "%s: the owned instances hold %u instances, %llu runs and %llu values; the header says %u, "
                       "%llu and %llu",
                       path, owned_seen, (unsigned long long)at.run_at, (unsigned long long)at.value_at, h->n_owned,
                       (unsigned long long)h->n_runs, (unsigned long long)h->n_values);
    out->n_entries = h->n_entries;
    out->n_chunks = h->n_chunks;
    out->n_workers = h->n_workers;
    out->worker = h->worker;
    out->n_instances = h->n_instances;
    out->cap_instances = h->n_instances;
    out->n_owned = h->n_owned;
    return PK_OK;
}

/* The chunk counts of the owned instances (room made for the runs and
 * values too, with_rows): each instance's adding up to its n_rows, its
 * first row from first_chunk and last_include rows from last_chunk. */
static pk_status read_chunk_counts(reader *r, const memsort_header *h, int with_rows, pk_memsort_result *out) {
    pk_context *ctx = r->ctx;
    uint64_t n_counts = (uint64_t)h->n_owned * h->n_chunks;
    pk_status st;
    if ((st = pk_memsort_result_reserve(ctx, out, with_rows ? h->n_runs : 0, with_rows ? h->n_values : 0, n_counts, 0)))
        return st;
    if ((st = read_u32s(r, out->chunk_counts, n_counts, "chunk counts")) != PK_OK ||
        (st = skip_padding(r, "chunk counts")) != PK_OK)
        return st;
    for (uint32_t g = 0; g < h->n_instances; g++) {
        const pk_memsort_instance *in = &out->instances[g];
        if (!in->owned) continue;
        const uint32_t *cc = out->chunk_counts + in->counts_offset;
        uint64_t sum = 0;
        for (uint32_t c = 0; c < h->n_chunks; c++) sum += cc[c];
        if (sum != in->n_rows)
            return pk_fail(ctx, PK_ERR_PARSE, "%s: instance %u: its chunk counts add up to %llu rows, its n_rows is %u",
                           r->path, g, (unsigned long long)sum, in->n_rows);
        /* its first row comes from first_chunk, last_include rows from last_chunk */
        if (cc[in->first_chunk] == 0 || cc[in->last_chunk] < in->last_include)
            return pk_fail(ctx, PK_ERR_PARSE,
                           "%s: instance %u: field %s is out of place (chunk %u holds %u of its rows)", r->path, g,
                           cc[in->first_chunk] == 0 ? "first_chunk" : "last_include",
                           cc[in->first_chunk] == 0 ? in->first_chunk : in->last_chunk,
                           cc[in->first_chunk] == 0 ? 0 : cc[in->last_chunk]);
    }
    return PK_OK;
}

/* The runs and values of the owned instances: each run non-empty, aligned
 * and after the one before; an instance's runs holding its n_rows from
 * first_addr to last_addr; its values as check_values checks them. */
static pk_status read_rows(reader *r, const memsort_header *h, pk_memsort_result *out) {
    pk_context *ctx = r->ctx;
    pk_status st;
    if ((st = read_u32s(r, (uint32_t *)out->runs, 2 * h->n_runs, "runs")) != PK_OK ||
        (st = read_u32s(r, out->values, h->n_values, "values")) != PK_OK || (st = skip_padding(r, "values")) != PK_OK)
        return st;
    for (uint32_t g = 0; g < h->n_instances; g++) {
        const pk_memsort_instance *in = &out->instances[g];
        if (!in->owned) continue;
        const pk_memsort_run_entry *run = out->runs + in->runs_offset;
        uint64_t sum = 0;
        for (uint32_t j = 0; j < in->n_runs; j++) {
            sum += run[j].count;
            if (run[j].count == 0 || run[j].addr % 8 || (j > 0 && run[j].addr <= run[j - 1].addr))
                return pk_fail(
                    ctx, PK_ERR_PARSE,
                    "%s: instance %u: run %u (0x%08x, %u) is empty, unaligned or not after the run before it", r->path,
                    g, j, run[j].addr, run[j].count);
        }
        if (sum != in->n_rows || run[0].addr != in->first_addr || run[in->n_runs - 1].addr != in->last_addr)
            return pk_fail(ctx, PK_ERR_PARSE,
                           "%s: instance %u: its runs (%llu rows, 0x%08x .. 0x%08x) do not match its n_rows %u, "
                           "first_addr and last_addr",
                           r->path, g, (unsigned long long)sum, run[0].addr, run[in->n_runs - 1].addr, in->n_rows);
        if ((st = check_values(ctx, r->path, out, g)) != PK_OK) return st;
    }
    out->n_runs = h->n_runs;
    out->n_values = h->n_values;
    return PK_OK;
}

pk_status pk_memsort_read(pk_context *ctx, const char *path, int with_rows, pk_memsort_regions *regions,
                          pk_memsort_result *out) {
    pk_clear(ctx);
    if (!path) return pk_fail(ctx, PK_ERR_INVALID, "pk_memsort_read: path is NULL");
    if (!regions) return pk_fail(ctx, PK_ERR_INVALID, "pk_memsort_read: regions is NULL");
    if (!out) return pk_fail(ctx, PK_ERR_INVALID, "pk_memsort_read: result is NULL");
    pk_memsort_result_free(out);
    memset(regions, 0, sizeof *regions);
    char *joined = NULL;
    reader r = {ctx, path, NULL, 0, 0};
    memsort_header h = {0};
    pk_status st = open_memsort_bin(&r, &joined);
    if (!st) st = read_header(&r, &h);
    if (!st) st = read_regions(&r, &h, regions, out->region_entries);
    if (!st) st = allocate_tables(&r, &h, out);
    if (!st) st = read_chunk_table(&r, &h, out);
    if (!st) st = read_instances(&r, &h, regions, out);
    if (!st) st = read_chunk_counts(&r, &h, with_rows, out);
    if (!st && with_rows) st = read_rows(&r, &h, out);
    if (r.fp) fclose(r.fp);
    free(joined);
    if (st) {
        pk_memsort_result_free(out);
        memset(regions, 0, sizeof *regions);
    }
    return st;
}
