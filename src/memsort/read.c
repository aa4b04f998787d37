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

#define MEMSORT_HEADER_BYTES 72u
#define MEMSORT_REGION_BYTES 48u
#define MEMSORT_INSTANCE_BYTES 96u

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

#define BAD(...) pk_fail(ctx, PK_ERR_PARSE, __VA_ARGS__)

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

pk_status pk_memsort_read(pk_context *ctx, const char *path, int with_rows, pk_memsort_regions *regions,
                          pk_memsort_result *out) {
    pk_clear(ctx);
    if (!path) return pk_fail(ctx, PK_ERR_INVALID, "pk_memsort_read: path is NULL");
    if (!regions) return pk_fail(ctx, PK_ERR_INVALID, "pk_memsort_read: regions is NULL");
    if (!out) return pk_fail(ctx, PK_ERR_INVALID, "pk_memsort_read: result is NULL");
    pk_memsort_result_free(out);
    memset(regions, 0, sizeof *regions);
    char dir_buf[4096], *joined = NULL;
    struct stat sb;
    if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) { /* a folder: its memsort.bin */
        const char *dir = pk_dir_name(path, dir_buf, sizeof dir_buf);
        joined = malloc(strlen(dir) + sizeof "/memsort.bin");
        if (!joined) return pk_fail(ctx, PK_ERR_NOMEM, "out of memory");
        sprintf(joined, "%s/memsort.bin", dir);
        path = joined;
    }
    reader r = {ctx, path, fopen(path, "rb"), 0, 0};
    pk_status st = PK_OK;
    if (!r.fp) {
        st = pk_fail(ctx, PK_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
        goto done;
    }
    if (fstat(fileno(r.fp), &sb) != 0 || !S_ISREG(sb.st_mode)) {
        st = pk_fail(ctx, PK_ERR_IO, "%s: not a regular file", path);
        goto done;
    }
    r.size = (uint64_t)sb.st_size;
    unsigned char h[MEMSORT_HEADER_BYTES];
    st = read_bytes(&r, h, sizeof h, "header");
    if (st) goto done;
    if (memcmp(h, "PKMSORT1", 8) != 0) {
        st = BAD("%s: not a memsort.bin (it does not start with PKMSORT1)", path);
        goto done;
    }
    uint32_t version = get_u32(h + 8);
    if (version == 1) {
        st =
            BAD("%s: a memsort.bin of version 1, which holds no chunk table; run pairkit memsort again to write "
                "version 2",
                path);
        goto done;
    }
    if (version != 2) {
        st = BAD("%s: header field version is %u; this build reads version 2", path, version);
        goto done;
    }
    struct {
        const char *name;
        uint32_t got, want;
    } sizes[] = {{"header_bytes", get_u32(h + 12), MEMSORT_HEADER_BYTES},
                 {"region_bytes", get_u32(h + 64), MEMSORT_REGION_BYTES},
                 {"instance_bytes", get_u32(h + 68), MEMSORT_INSTANCE_BYTES}};
    for (int k = 0; k < 3; k++)
        if (sizes[k].got != sizes[k].want) {
            st = BAD("%s: header field %s is %u, expected %u", path, sizes[k].name, sizes[k].got, sizes[k].want);
            goto done;
        }
    uint64_t n_entries = get_u64(h + 16), n_runs = get_u64(h + 48), n_values = get_u64(h + 56);
    uint32_t n_chunks = get_u32(h + 24), n_regions = get_u32(h + 28), n_instances = get_u32(h + 32);
    uint32_t n_owned = get_u32(h + 36), n_workers = get_u32(h + 40), worker = get_u32(h + 44);
    if (n_entries >= (1ull << 32))
        st = BAD("%s: header field n_entries is %llu, at least 2^32", path, (unsigned long long)n_entries);
    else if (n_chunks < 1 || n_chunks > PK_MEMSORT_MAX_CHUNKS)
        st = BAD("%s: header field n_chunks is %u, not 1 .. %d", path, n_chunks, PK_MEMSORT_MAX_CHUNKS);
    else if (n_regions < 1 || n_regions > PK_MEMSORT_MAX_REGIONS)
        st = BAD("%s: header field n_regions is %u, not 1 .. %d", path, n_regions, PK_MEMSORT_MAX_REGIONS);
    else if (n_workers < 1 || worker >= n_workers)
        st =
            BAD("%s: header fields n_workers %u and worker %u: a worker below n_workers >= 1", path, n_workers, worker);
    else if (n_owned > n_instances)
        st = BAD("%s: header field n_owned is %u, more than the %u instances", path, n_owned, n_instances);
    else if (n_values > n_entries)
        st = BAD("%s: header field n_values is %llu, more than the %llu entries", path, (unsigned long long)n_values,
                 (unsigned long long)n_entries);
    else if (n_runs > n_values)
        st = BAD("%s: header field n_runs is %llu, more than the %llu values", path, (unsigned long long)n_runs,
                 (unsigned long long)n_values);
    if (st) goto done;
    /* the whole file's size, from the header alone, before anything large is allocated */
    uint64_t n_counts = (uint64_t)n_owned * n_chunks;
    uint64_t expect = MEMSORT_HEADER_BYTES + (uint64_t)MEMSORT_REGION_BYTES * n_regions + 8ull * (n_chunks + 1) +
                      (uint64_t)MEMSORT_INSTANCE_BYTES * n_instances + 4 * (n_counts + n_counts % 2) + 8 * n_runs +
                      4 * (n_values + n_values % 2);
    if (r.size != expect) {
        st = BAD("%s: %s: %llu bytes, the header's sections take %llu", path,
                 r.size < expect ? "cut short" : "longer than its header says", (unsigned long long)r.size,
                 (unsigned long long)expect);
        goto done;
    }

    /* regions */
    uint64_t region_entries[PK_MEMSORT_MAX_REGIONS] = {0}, entries_sum = 0;
    regions->n_regions = n_regions;
    for (uint32_t k = 0; k < n_regions; k++) {
        unsigned char x[MEMSORT_REGION_BYTES];
        if ((st = read_bytes(&r, x, sizeof x, "regions")) != PK_OK) goto done;
        pk_memsort_region *reg = &regions->region[k];
        const unsigned char *nul = memchr(x, 0, PK_MEMSORT_NAME_MAX);
        if (nul == NULL) {
            st = BAD("%s: region %u: its name is not NUL-terminated within 16 bytes", path, k);
            goto done;
        }
        for (const unsigned char *q = nul; q < x + PK_MEMSORT_NAME_MAX; q++)
            if (*q) {
                st = BAD("%s: region %u: the bytes after its name's NUL are not zero", path, k);
                goto done;
            }
        if (get_u32(x + 44) != 0) {
            st = BAD("%s: region %u: field reserved is %u, not 0", path, k, get_u32(x + 44));
            goto done;
        }
        memcpy(reg->name, x, PK_MEMSORT_NAME_MAX);
        reg->base = get_u32(x + 16);
        reg->max_instances = get_u32(x + 20);
        reg->size = get_u64(x + 24);
        region_entries[k] = get_u64(x + 32);
        reg->instance_entries = get_u32(x + 40);
        entries_sum += region_entries[k] < (1ull << 32) ? region_entries[k] : (1ull << 32);
    }
    if ((st = pk_memsort_regions_check(ctx, regions)) != PK_OK) {
        char msg[PK_MESSAGE_MAX];
        snprintf(msg, sizeof msg, "%s", ctx ? ctx->message : "");
        st = pk_fail(ctx, PK_ERR_PARSE, "%s: its region table: %s", path, msg);
        goto done;
    }
    if (entries_sum != n_entries) {
        st = BAD("%s: the regions' entries add up to %llu, the header says n_entries %llu", path,
                 (unsigned long long)entries_sum, (unsigned long long)n_entries);
        goto done;
    }

    /* the chunk table */
    out->chunk_start = malloc(((size_t)n_chunks + 1) * sizeof(uint64_t));
    out->instances = calloc((size_t)n_instances + 1, sizeof(pk_memsort_instance));
    if (!out->chunk_start || !out->instances) {
        st = pk_fail(ctx, PK_ERR_NOMEM, "%s: out of memory for %u instances", path, n_instances);
        goto done;
    }
    for (uint32_t c = 0; c <= n_chunks; c++) {
        unsigned char x[8];
        if ((st = read_bytes(&r, x, 8, "chunk table")) != PK_OK) goto done;
        out->chunk_start[c] = get_u64(x);
        if ((c == 0 && out->chunk_start[0] != 0) || (c > 0 && out->chunk_start[c] < out->chunk_start[c - 1]) ||
            (c == n_chunks && out->chunk_start[c] != n_entries)) {
            st =
                BAD("%s: chunk table entry %u is %llu: the table runs from 0 up to n_entries %llu without going "
                    "back",
                    path, c, (unsigned long long)out->chunk_start[c], (unsigned long long)n_entries);
            goto done;
        }
    }

    /* the instances, checked against the regions and one another */
    uint32_t gid = 0, owned_seen = 0;
    uint64_t run_at = 0, value_at = 0;
    for (uint32_t k = 0; k < n_regions; k++) {
        uint64_t s = regions->region[k].instance_entries;
        uint64_t want = (region_entries[k] + s - 1) / s;
        if (want > regions->region[k].max_instances) {
            st = BAD("%s: region %u (%s): %llu entries need %llu instances of %llu, more than its %u", path, k,
                     regions->region[k].name, (unsigned long long)region_entries[k], (unsigned long long)want,
                     (unsigned long long)s, regions->region[k].max_instances);
            goto done;
        }
        for (uint64_t i = 0; i < want; i++, gid++) {
            unsigned char x[MEMSORT_INSTANCE_BYTES];
            if (gid >= n_instances) {
                st = BAD("%s: the regions' entries need more than the header's n_instances %u", path, n_instances);
                goto done;
            }
            if ((st = read_bytes(&r, x, sizeof x, "instances")) != PK_OK) goto done;
            pk_memsort_instance *in = &out->instances[gid];
            uint32_t f[20];
            for (int j = 0; j < 4; j++) f[j] = get_u32(x + 4 * j);
            for (int j = 0; j < 14; j++) f[4 + j] = get_u32(x + 24 + 4 * j);
            in->gid = f[0];
            in->region = f[1];
            in->index = f[2];
            in->owned = f[3];
            in->first_row = get_u64(x + 16);
            in->n_rows = f[4];
            in->first_addr = f[5];
            in->last_addr = f[6];
            in->first_chunk = f[7];
            in->first_skip = f[8];
            in->first_skip_total = f[9];
            in->last_chunk = f[10];
            in->last_include = f[11];
            in->last_include_total = f[12];
            in->has_prev = f[13];
            in->prev_addr = f[14];
            in->prev_value = f[15];
            in->n_runs = f[16];
            uint64_t runs_offset = get_u64(x + 80), values_offset = get_u64(x + 88);
            uint64_t rows = region_entries[k] - i * s < s ? region_entries[k] - i * s : s;
            const pk_memsort_region *reg = &regions->region[k];
            /* the occurrences of the first address that earlier instances
             * hold: those of the previous instance (and of the ones before
             * it, when it holds that address alone) */
            const pk_memsort_instance *prev = i > 0 ? in - 1 : NULL;
            uint64_t skip_before = 0;
            if (prev && in->first_addr == prev->last_addr)
                skip_before = (uint64_t)prev->last_include_total +
                              (prev->first_addr == prev->last_addr ? prev->first_skip_total : 0);
            const char *field = NULL;
            if (in->gid != gid) field = "gid";
            else if (in->region != k) field = "region";
            else if (in->index != i) field = "index";
            else if (in->owned != (gid % n_workers == worker)) field = "owned";
            else if (in->first_row != i * s) field = "first_row";
            else if (in->n_rows != rows) field = "n_rows";
            else if (in->first_addr < reg->base || in->first_addr - reg->base >= reg->size || in->first_addr % 8)
                field = "first_addr";
            else if (in->last_addr < in->first_addr || in->last_addr - reg->base >= reg->size || in->last_addr % 8)
                field = "last_addr";
            else if (in->first_chunk >= n_chunks) field = "first_chunk";
            else if (in->last_chunk >= n_chunks) field = "last_chunk";
            else if (in->first_skip > in->first_skip_total) field = "first_skip";
            else if (in->last_include < 1 || in->last_include > in->last_include_total) field = "last_include";
            else if (in->last_include_total > in->n_rows) field = "last_include_total";
            else if (in->last_include_total != in->n_rows && in->first_addr == in->last_addr)
                field = "last_include_total";
            else if (in->last_include_total >= in->n_rows && in->first_addr != in->last_addr)
                field = "last_include_total";
            else if (in->has_prev != (i > 0)) field = "has_prev";
            else if (i == 0 && (in->prev_addr || in->prev_value)) field = in->prev_addr ? "prev_addr" : "prev_value";
            else if (i > 0 && in->prev_addr != prev->last_addr) field = "prev_addr";
            else if (i > 0 && (in->prev_value < out->chunk_start[prev->last_chunk] ||
                               in->prev_value >= out->chunk_start[prev->last_chunk + 1]))
                field = "prev_value"; /* the previous instance's last row lies in its last chunk */
            else if (i > 0 && in->first_addr < prev->last_addr) field = "first_addr";
            else if (in->first_skip_total != skip_before) field = "first_skip_total";
            else if (i > 0 && in->first_addr == prev->last_addr && in->first_chunk < prev->last_chunk)
                field = "first_chunk";
            else if (get_u32(x + 76) != 0) field = "reserved";
            else if (in->owned && (in->n_runs < 1 || in->n_runs > in->n_rows)) field = "n_runs";
            else if (!in->owned && in->n_runs) field = "n_runs";
            else if (runs_offset != (in->owned ? run_at : 0)) field = "runs_offset";
            else if (values_offset != (in->owned ? value_at : 0)) field = "values_offset";
            if (field) {
                st = BAD("%s: instance %u: field %s is out of place (%s)", path, gid, field,
                         "it does not agree with the regions, the header or the instances before it");
                goto done;
            }
            if (in->owned) {
                in->runs_offset = run_at;
                in->values_offset = value_at;
                in->counts_offset = (uint64_t)owned_seen * n_chunks;
                run_at += in->n_runs;
                value_at += in->n_rows;
                owned_seen++;
            }
        }
    }
    if (gid != n_instances) {
        st = BAD("%s: header field n_instances is %u, the regions' entries make %u", path, n_instances, gid);
        goto done;
    }
    if (owned_seen != n_owned || run_at != n_runs || value_at != n_values) {
        st =
            BAD("%s: the owned instances hold %u instances, %llu runs and %llu values; the header says %u, %llu and "
                "%llu",
                path, owned_seen, (unsigned long long)run_at, (unsigned long long)value_at, n_owned,
                (unsigned long long)n_runs, (unsigned long long)n_values);
        goto done;
    }
    out->n_entries = n_entries;
    out->n_chunks = n_chunks;
    out->n_workers = n_workers;
    out->worker = worker;
    out->n_instances = n_instances;
    out->cap_instances = n_instances;
    out->n_owned = n_owned;
    memcpy(out->region_entries, region_entries, sizeof region_entries);

    /* chunk counts, then (with_rows) runs and values */
    if ((st = pk_memsort_result_reserve(ctx, out, with_rows ? n_runs : 0, with_rows ? n_values : 0, n_counts, 0)))
        goto done;
    if ((st = read_u32s(&r, out->chunk_counts, n_counts, "chunk counts")) != PK_OK ||
        (st = skip_padding(&r, "chunk counts")) != PK_OK)
        goto done;
    for (uint32_t g = 0; g < n_instances; g++) {
        const pk_memsort_instance *in = &out->instances[g];
        if (!in->owned) continue;
        uint64_t sum = 0;
        for (uint32_t c = 0; c < n_chunks; c++) sum += out->chunk_counts[in->counts_offset + c];
        if (sum != in->n_rows) {
            st = BAD("%s: instance %u: its chunk counts add up to %llu rows, its n_rows is %u", path, g,
                     (unsigned long long)sum, in->n_rows);
            goto done;
        }
        /* its first row comes from first_chunk, last_include rows from last_chunk */
        const uint32_t *cc = out->chunk_counts + in->counts_offset;
        if (cc[in->first_chunk] == 0 || cc[in->last_chunk] < in->last_include) {
            st = BAD("%s: instance %u: field %s is out of place (chunk %u holds %u of its rows)", path, g,
                     cc[in->first_chunk] == 0 ? "first_chunk" : "last_include",
                     cc[in->first_chunk] == 0 ? in->first_chunk : in->last_chunk,
                     cc[in->first_chunk] == 0 ? 0 : cc[in->last_chunk]);
            goto done;
        }
    }
    if (with_rows) {
        if ((st = read_u32s(&r, (uint32_t *)out->runs, 2 * n_runs, "runs")) != PK_OK ||
            (st = read_u32s(&r, out->values, n_values, "values")) != PK_OK ||
            (st = skip_padding(&r, "values")) != PK_OK)
            goto done;
        for (uint32_t g = 0; g < n_instances; g++) {
            const pk_memsort_instance *in = &out->instances[g];
            if (!in->owned) continue;
            const pk_memsort_run_entry *run = out->runs + in->runs_offset;
            uint64_t sum = 0;
            for (uint32_t j = 0; j < in->n_runs; j++) {
                sum += run[j].count;
                if (run[j].count == 0 || run[j].addr % 8 || (j > 0 && run[j].addr <= run[j - 1].addr)) {
                    st = BAD("%s: instance %u: run %u (0x%08x, %u) is empty, unaligned or not after the run before it",
                             path, g, j, run[j].addr, run[j].count);
                    goto done;
                }
            }
            if (sum != in->n_rows || run[0].addr != in->first_addr || run[in->n_runs - 1].addr != in->last_addr) {
                st =
                    BAD("%s: instance %u: its runs (%llu rows, 0x%08x .. 0x%08x) do not match its n_rows %u, "
                        "first_addr and last_addr",
                        path, g, (unsigned long long)sum, run[0].addr, run[in->n_runs - 1].addr, in->n_rows);
                goto done;
            }
            if ((st = check_values(ctx, path, out, g)) != PK_OK) goto done;
        }
        out->n_runs = n_runs;
        out->n_values = n_values;
    }
done:
    if (r.fp) fclose(r.fp);
    free(joined);
    if (st) {
        pk_memsort_result_free(out);
        memset(regions, 0, sizeof *regions);
    }
    return st;
}
