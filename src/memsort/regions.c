/* regions.c - region tables: the presets, the text file format, the checks,
 * and the layout the sorting loops use.
 *
 * Invariant: a table that passed pk_memsort_regions_check has regions that
 * are 8-byte aligned, do not overlap, and whose compact addresses (the
 * sizes / 8, packed in table order) fit in 29 bits.
 */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "memsort_internal.h"

static void set_region(pk_memsort_region *r, const char *name, uint32_t base, uint64_t size, uint32_t max_instances,
                       uint32_t instance_entries) {
    memset(r, 0, sizeof *r);
    snprintf(r->name, sizeof r->name, "%s", name);
    r->base = base;
    r->size = size;
    r->max_instances = max_instances;
    r->instance_entries = instance_entries;
}

pk_status pk_memsort_regions_preset(pk_context *ctx, const char *name, pk_memsort_regions *out) {
    pk_clear(ctx);
    if (!out) return pk_fail(ctx, PK_ERR_INVALID, "pk_memsort_regions_preset: out is NULL");
    memset(out, 0, sizeof *out);
    if (!name) return pk_fail(ctx, PK_ERR_INVALID, "pk_memsort_regions_preset: name is NULL");
    const uint64_t M = 1u << 20;
    if (strcmp(name, "default") == 0) {
        out->n_regions = 3;
        set_region(&out->region[0], "ROM", 0x80000000u, 16 * M * 8, 32, 1u << 22);
        set_region(&out->region[1], "INPUT", 0x90000000u, 16 * M * 8, 32, 1u << 22);
        set_region(&out->region[2], "RAM", 0xA0000000u, 64 * M * 8, 256, 1u << 22);
        return PK_OK;
    }
    if (strcmp(name, "zisk") == 0) {
        out->n_regions = 3;
        set_region(&out->region[0], "ROM", 0x80000000u, 16 * M * 8, 32, 1u << 21);
        set_region(&out->region[1], "INPUT", 0x40000000u, 1024 * M, 32, 1u << 21);
        set_region(&out->region[2], "RAM", 0xA0000000u, 64 * M * 8, 256, 1u << 22);
        return PK_OK;
    }
    return pk_fail(ctx, PK_ERR_INVALID, "unknown region preset '%s' (default or zisk)", name);
}

uint64_t pk_memsort_regions_compact_size(const pk_memsort_regions *regions) {
    uint64_t total = 0;
    for (uint32_t r = 0; regions && r < regions->n_regions && r < PK_MEMSORT_MAX_REGIONS; r++)
        total += regions->region[r].size >> 3;
    return total;
}

pk_status pk_memsort_regions_check(pk_context *ctx, const pk_memsort_regions *t) {
    pk_clear(ctx);
    if (!t) return pk_fail(ctx, PK_ERR_INVALID, "regions is NULL");
    if (t->n_regions == 0 || t->n_regions > PK_MEMSORT_MAX_REGIONS)
        return pk_fail(ctx, PK_ERR_INVALID, "region table: %u regions (1 to %d allowed)", t->n_regions,
                       PK_MEMSORT_MAX_REGIONS);
    for (uint32_t i = 0; i < t->n_regions; i++) {
        const pk_memsort_region *r = &t->region[i];
        /* before any message prints the name */
        if (!memchr(r->name, '\0', sizeof r->name))
            return pk_fail(ctx, PK_ERR_INVALID, "region %u: name is not terminated within %d bytes", i,
                           PK_MEMSORT_NAME_MAX);
        if (r->name[0] == '\0') return pk_fail(ctx, PK_ERR_INVALID, "region %u: empty name", i);
        if (r->base % 8 || r->size % 8 || r->size == 0)
            return pk_fail(ctx, PK_ERR_INVALID, "region %s: base and size must be positive multiples of 8", r->name);
        if ((uint64_t)r->base + r->size > (1ull << 32))
            return pk_fail(ctx, PK_ERR_INVALID, "region %s: ends beyond 2^32", r->name);
        if (r->max_instances == 0 || r->instance_entries == 0)
            return pk_fail(ctx, PK_ERR_INVALID, "region %s: max_instances and instance_entries must be > 0", r->name);
        for (uint32_t j = 0; j < i; j++) {
            const pk_memsort_region *q = &t->region[j];
            if ((uint64_t)r->base < (uint64_t)q->base + q->size && (uint64_t)q->base < (uint64_t)r->base + r->size)
                return pk_fail(ctx, PK_ERR_INVALID, "regions %s and %s overlap", q->name, r->name);
            if (strcmp(q->name, r->name) == 0)
                return pk_fail(ctx, PK_ERR_INVALID, "region name %s appears twice", r->name);
        }
    }
    if (pk_memsort_regions_compact_size(t) > (1ull << 29))
        return pk_fail(ctx, PK_ERR_INVALID, "region table: more than 2^29 compact addresses");
    return PK_OK;
}

/* A number: decimal or 0x hex, optionally "2^k", with an optional K, M or
 * G suffix (powers of 1024). One well formed but past 64 bits (2^64,
 * 99999999999999999999) is UINT64_MAX, so that it is reported as out of
 * range, not as text. */
static int parse_number(const char *tok, uint64_t *out) {
    char *end;
    errno = 0;
    uint64_t v = 0;
    int over = 0;
    if (strncmp(tok, "2^", 2) == 0) {
        if (!isdigit((unsigned char)tok[2])) return -1;
        unsigned long long k = strtoull(tok + 2, &end, 10);
        if (k > 63 || errno) over = 1;
        else v = 1ull << k;
    } else {
        /* decimal, or hex after 0x; a leading 0 is not octal */
        int hex = tok[0] == '0' && (tok[1] == 'x' || tok[1] == 'X');
        const char *digits = hex ? tok + 2 : tok;
        if (!isxdigit((unsigned char)digits[0])) return -1;
        v = strtoull(digits, &end, hex ? 16 : 10);
        if (end == digits) return -1;
        if (errno == ERANGE) over = 1;
        else if (errno) return -1;
    }
    uint64_t mul = 1;
    if (*end == 'K' || *end == 'k') mul = 1ull << 10, end++;
    else if (*end == 'M' || *end == 'm') mul = 1ull << 20, end++;
    else if (*end == 'G' || *end == 'g') mul = 1ull << 30, end++;
    if (*end != '\0') return -1;
    *out = over || v > UINT64_MAX / mul ? UINT64_MAX : v * mul;
    return 0;
}

pk_status pk_memsort_regions_read(pk_context *ctx, const char *path, pk_memsort_regions *out) {
    pk_clear(ctx);
    if (!out) return pk_fail(ctx, PK_ERR_INVALID, "pk_memsort_regions_read: out is NULL");
    memset(out, 0, sizeof *out);
    if (!path) return pk_fail(ctx, PK_ERR_INVALID, "pk_memsort_regions_read: path is NULL");
    char *text;
    size_t size;
    pk_status st = pk_read_file(ctx, path, &text, &size);
    if (st) return st;
    const char *nul = memchr(text, '\0', size);
    if (nul) {
        int at_line = 1;
        for (const char *c = text; c < nul; c++) at_line += *c == '\n';
        st = pk_fail(ctx, PK_ERR_PARSE, "%s:%d: a NUL byte: not a text file", path, at_line);
        free(text);
        return st;
    }
    static const char *fields[5] = {"name", "base", "size", "max_instances", "instance_entries"};
    int line_no = 0;
    /* line by line, blank ones counted too (strtok would skip them) */
    for (char *line = text, *next; line; line = next) {
        next = strchr(line, '\n');
        if (next) *next++ = '\0';
        line_no++;
        char *hash = strchr(line, '#');
        if (hash) *hash = '\0';
        char *tok[6];
        int n_tok = 0;
        char *save_tok = NULL;
        for (char *t = strtok_r(line, " \t\r", &save_tok); t; t = strtok_r(NULL, " \t\r", &save_tok)) {
            if (n_tok < 6) tok[n_tok] = t;
            n_tok++; /* all counted, for the message */
        }
        if (n_tok == 0) continue;
        if (n_tok != 5) {
            st = pk_fail(ctx, PK_ERR_PARSE,
                         "%s:%d: expected 5 fields (name base size max_instances instance_entries), got %d", path,
                         line_no, n_tok);
            goto done;
        }
        if (out->n_regions == PK_MEMSORT_MAX_REGIONS) {
            st = pk_fail(ctx, PK_ERR_PARSE, "%s:%d: more than %d regions", path, line_no, PK_MEMSORT_MAX_REGIONS);
            goto done;
        }
        if (strlen(tok[0]) >= PK_MEMSORT_NAME_MAX) {
            st = pk_fail(ctx, PK_ERR_PARSE, "%s:%d: name: '%s' is longer than %d characters", path, line_no, tok[0],
                         PK_MEMSORT_NAME_MAX - 1);
            goto done;
        }
        uint64_t v[5];
        for (int f = 1; f < 5; f++) {
            if (parse_number(tok[f], &v[f])) {
                st = pk_fail(ctx, PK_ERR_PARSE, "%s:%d: %s: '%s' is not a number", path, line_no, fields[f], tok[f]);
                goto done;
            }
        }
        const uint64_t limit[5] = {0, 0xFFFFFFFFull, 1ull << 32, 0xFFFFFFFFull, 0xFFFFFFFFull};
        for (int f = 1; f < 5; f++) {
            if (v[f] > limit[f]) {
                char last = tok[f][strlen(tok[f]) - 1];
                int suffix = strchr("KkMmGg", last) != NULL; /* none of them a hex digit */
                st = pk_fail(ctx, PK_ERR_PARSE, "%s:%d: %s: %s is out of range (at most %llu%s)", path, line_no,
                             fields[f], tok[f], (unsigned long long)limit[f],
                             suffix ? "; a K, M or G suffix multiplies by 2^10, 2^20 or 2^30" : "");
                goto done;
            }
        }
        pk_memsort_region *r = &out->region[out->n_regions++];
        set_region(r, tok[0], (uint32_t)v[1], v[2], (uint32_t)v[3], (uint32_t)v[4]);
        pk_memsort_regions tmp = *out;
        if ((st = pk_memsort_regions_check(ctx, &tmp)) != PK_OK) {
            char msg[PK_MESSAGE_MAX];
            snprintf(msg, sizeof msg, "%s", ctx ? ctx->message : "");
            st = pk_fail(ctx, PK_ERR_PARSE, "%s:%d: %s", path, line_no, msg);
            goto done;
        }
    }
    if (out->n_regions == 0) st = pk_fail(ctx, PK_ERR_PARSE, "%s: no regions", path);
done:
    free(text);
    return st;
}

pk_status pk_memsort_regions_get(pk_context *ctx, const char *name_or_path, pk_memsort_regions *out) {
    pk_clear(ctx);
    if (!out) return pk_fail(ctx, PK_ERR_INVALID, "pk_memsort_regions_get: out is NULL");
    if (!name_or_path) {
        memset(out, 0, sizeof *out);
        return pk_fail(ctx, PK_ERR_INVALID, "pk_memsort_regions_get: name_or_path is NULL");
    }
    if (strcmp(name_or_path, "default") == 0 || strcmp(name_or_path, "zisk") == 0)
        return pk_memsort_regions_preset(ctx, name_or_path, out);
    return pk_memsort_regions_read(ctx, name_or_path, out);
}

void pk_memsort_layout_make(const pk_memsort_regions *t, pk_memsort_layout *l) {
    memset(l, 0, sizeof *l);
    l->n_regions = t->n_regions;
    uint32_t c = 0;
    for (uint32_t r = 0; r < t->n_regions; r++) {
        l->base[r] = t->region[r].base;
        l->end[r] = (uint64_t)t->region[r].base + t->region[r].size;
        l->compact_base[r] = c;
        l->instance_entries[r] = t->region[r].instance_entries;
        l->max_instances[r] = t->region[r].max_instances;
        c += (uint32_t)(t->region[r].size >> 3);
    }
    l->compact_base[t->n_regions] = c;
    l->n_compact = c;
    int bits = 1;
    while (bits < 32 && (1ull << bits) < c) bits++;
    l->key_bits = bits;
}
