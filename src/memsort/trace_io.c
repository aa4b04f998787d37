/* trace_io.c - memory traces on disk: the chunk files mem_addr_NNNN.bin
 * (little-endian u32 raw addresses), their checks, and page-locking.
 *
 * Invariant: a trace returned by pk_memsort_trace_read has passed
 * pk_memsort_trace_check against the table it was read with; every error
 * names the chunk file and the entry index within that file.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "memsort_internal.h"

#define CHUNK_PREFIX "mem_addr_"
#define CHUNK_SUFFIX ".bin"

uint32_t pk_memsort_chunk_at(const uint64_t *chunk_start, uint32_t n_chunks, uint64_t position) {
    uint32_t lo = 0, hi = n_chunks; /* answer in [lo, hi) */
    while (hi - lo > 1) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (chunk_start[mid] <= position) lo = mid;
        else hi = mid;
    }
    return lo;
}

uint32_t pk_memsort_chunk_of(const pk_memsort_trace *trace, uint64_t pos) {
    return pk_memsort_chunk_at(trace->chunk_start, trace->n_chunks, pos);
}

void pk_memsort_entry_name(const pk_memsort_trace *trace, uint64_t pos, char *buf, size_t size) {
    uint32_t c = pk_memsort_chunk_of(trace, pos);
    snprintf(buf, size, CHUNK_PREFIX "%04u" CHUNK_SUFFIX " entry %llu", c,
             (unsigned long long)(pos - trace->chunk_start[c]));
}

static int host_is_little_endian(void) {
    const uint16_t one = 1;
    return *(const uint8_t *)&one == 1;
}

pk_status pk_memsort_capacity_error(pk_context *ctx, const pk_memsort_layout *layout, const pk_memsort_regions *regions,
                                    const pk_memsort_trace *trace, int r, uint64_t n_region) {
    const pk_memsort_region *reg = &regions->region[r];
    uint64_t cap = (uint64_t)reg->max_instances * reg->instance_entries;
    uint64_t seen = 0, pos = 0;
    for (pos = 0; pos < trace->n_entries; pos++)
        if (pk_memsort_region_of(layout, trace->addr[pos]) == r && seen++ == cap) break;
    char where[96];
    pk_memsort_entry_name(trace, pos, where, sizeof where);
    return pk_fail(ctx, PK_ERR_PARSE,
                   "%s: region %s already holds %llu entries, all its %u instances of %u rows allow "
                   "(the trace has %llu in this region)",
                   where, reg->name, (unsigned long long)cap, reg->max_instances, reg->instance_entries,
                   (unsigned long long)n_region);
}

pk_status pk_memsort_trace_check_structure(pk_context *ctx, const pk_memsort_trace *trace) {
    if (!trace) return pk_fail(ctx, PK_ERR_INVALID, "trace is NULL");
    if (trace->n_chunks == 0 || trace->n_chunks > PK_MEMSORT_MAX_CHUNKS)
        return pk_fail(ctx, PK_ERR_INVALID, "trace: %u chunks (1 to %d allowed)", trace->n_chunks,
                       PK_MEMSORT_MAX_CHUNKS);
    if (trace->n_entries >= (1ull << 32))
        return pk_fail(ctx, PK_ERR_INVALID, "trace: %llu entries, at most 2^32 - 1 allowed",
                       (unsigned long long)trace->n_entries);
    if (!trace->chunk_start) return pk_fail(ctx, PK_ERR_INVALID, "trace: chunk_start is NULL");
    /* a start that goes back named as such, before the table's ends */
    if (trace->chunk_start[0] != 0)
        return pk_fail(ctx, PK_ERR_INVALID, "trace: chunk 0 starts at entry %llu, not 0",
                       (unsigned long long)trace->chunk_start[0]);
    for (uint32_t c = 0; c < trace->n_chunks; c++)
        if (trace->chunk_start[c + 1] < trace->chunk_start[c])
            return pk_fail(ctx, PK_ERR_INVALID, "trace: chunk %u ends before it starts (entries %llu to %llu)", c,
                           (unsigned long long)trace->chunk_start[c], (unsigned long long)trace->chunk_start[c + 1]);
    if (trace->chunk_start[trace->n_chunks] != trace->n_entries)
        return pk_fail(ctx, PK_ERR_INVALID,
                       "trace: chunk table does not cover the %llu entries (its chunks end at %llu)",
                       (unsigned long long)trace->n_entries, (unsigned long long)trace->chunk_start[trace->n_chunks]);
    if (trace->n_entries && !trace->addr) return pk_fail(ctx, PK_ERR_INVALID, "trace: no addresses");
    return PK_OK;
}

/* Whether a[0..n) (n < 2^32) holds an entry that is misaligned or in no
 * region; each region's entries are added to counts. Without branches,
 * so that the compiler vectorises it; nr is a constant in each caller. */
static inline int bad_in_block_nr(const uint32_t *lo, const uint32_t *span, const uint32_t *a, uint32_t n,
                                  uint64_t *counts, const uint32_t nr) {
    uint32_t c[PK_MEMSORT_MAX_REGIONS] = {0}, bad = 0;
    for (uint32_t j = 0; j < n; j++) {
        uint32_t raw = a[j], found = 0;
        for (uint32_t r = 0; r < nr; r++) {
            uint32_t in = raw - lo[r] <= span[r];
            c[r] += in;
            found |= in;
        }
        bad |= (raw & 7) | (found ^ 1);
    }
    for (uint32_t r = 0; r < nr; r++) counts[r] += c[r];
    return bad != 0;
}

static int bad_in_block(const uint32_t *lo, const uint32_t *span, uint32_t nr, const uint32_t *a, uint32_t n,
                        uint64_t *counts) {
    switch (nr) {
    case 1: return bad_in_block_nr(lo, span, a, n, counts, 1);
    case 2: return bad_in_block_nr(lo, span, a, n, counts, 2);
    case 3: return bad_in_block_nr(lo, span, a, n, counts, 3);
    case 4: return bad_in_block_nr(lo, span, a, n, counts, 4);
    default: return bad_in_block_nr(lo, span, a, n, counts, nr);
    }
}

/* Entries checked a block at a time: small enough to stay in L1 for the
 * scan that finds the bad one in a block that has one. */
#define CHECK_BLOCK 4096u

/* (memsort_internal.h) All of a's entries are counted where none is bad. */
uint64_t pk_memsort_first_bad(const pk_memsort_layout *l, const uint32_t *a, uint64_t n, uint64_t *counts) {
    uint32_t lo[PK_MEMSORT_MAX_REGIONS], span[PK_MEMSORT_MAX_REGIONS];
    for (uint32_t r = 0; r < l->n_regions; r++) {
        lo[r] = (uint32_t)l->base[r];
        span[r] = (uint32_t)(l->end[r] - 1 - l->base[r]);
    }
    for (uint64_t i = 0; i < n; i += CHECK_BLOCK) {
        uint32_t m = n - i < CHECK_BLOCK ? (uint32_t)(n - i) : CHECK_BLOCK;
        if (!bad_in_block(lo, span, l->n_regions, a + i, m, counts)) continue;
        for (uint32_t j = 0; j < m; j++)
            if ((a[i + j] & 7) || pk_memsort_region_of(l, a[i + j]) < 0) return i + j;
    }
    return n;
}

/* pk_memsort_first_bad on n_threads threads, each its contiguous part in
 * whole blocks. */
static uint64_t first_bad_threads(int n_threads, const pk_memsort_layout *l, const uint32_t *addr, uint64_t n,
                                  uint64_t *counts) {
    uint64_t first_bad = n;
#pragma omp parallel num_threads(n_threads)
    {
        uint64_t local[PK_MEMSORT_MAX_REGIONS] = {0};
        uint64_t bad = n;
        int t = 0, nt = 1;
#ifdef _OPENMP
        t = omp_get_thread_num();
        nt = omp_get_num_threads();
#endif
        uint64_t blocks = (n + CHECK_BLOCK - 1) / CHECK_BLOCK;
        uint64_t b = blocks * (uint64_t)t / (uint64_t)nt * CHECK_BLOCK,
                 e = blocks * (uint64_t)(t + 1) / (uint64_t)nt * CHECK_BLOCK;
        if (e > n) e = n;
        if (b < e) {
            uint64_t at = pk_memsort_first_bad(l, addr + b, e - b, local);
            if (at < e - b) bad = b + at;
        }
#pragma omp critical
        {
            if (bad < first_bad) first_bad = bad;
            for (uint32_t r = 0; r < l->n_regions; r++) counts[r] += local[r];
        }
    }
    return first_bad;
}

/* " (it lies in region R of the 'P' preset)" for an address in no region
 * of the table given, when a preset has it: a trace made for the other
 * preset is the likely cause. "" otherwise. */
static void preset_hint(uint32_t a, char *hint, size_t size) {
    static const char *const presets[] = {"default", "zisk"};
    hint[0] = '\0';
    for (int p = 0; p < 2 && !hint[0]; p++) {
        pk_context quiet;
        pk_context_init(&quiet);
        pk_memsort_regions other;
        if (pk_memsort_regions_preset(&quiet, presets[p], &other) != PK_OK) continue;
        for (uint32_t r = 0; r < other.n_regions; r++)
            if (a >= other.region[r].base && (uint64_t)a - other.region[r].base < other.region[r].size)
                snprintf(hint, size, " (it lies in region %s of the '%s' preset)", other.region[r].name, presets[p]);
    }
}

pk_status pk_memsort_trace_check(pk_context *ctx, const pk_memsort_regions *regions, const pk_memsort_trace *trace) {
    pk_clear(ctx);
    pk_status st = pk_memsort_regions_check(ctx, regions);
    if (st) return st;
    if ((st = pk_memsort_trace_check_structure(ctx, trace)) != PK_OK) return st;
    pk_memsort_layout layout;
    pk_memsort_layout_make(regions, &layout);
    const uint64_t n = trace->n_entries;
    const uint32_t *addr = trace->addr;
    uint64_t counts[PK_MEMSORT_MAX_REGIONS] = {0};
    uint64_t first_bad = first_bad_threads(pk_thread_count(ctx), &layout, addr, n, counts);
    if (first_bad < n) {
        char where[96];
        pk_memsort_entry_name(trace, first_bad, where, sizeof where);
        uint32_t a = addr[first_bad];
        if (a & 7) return pk_fail(ctx, PK_ERR_PARSE, "%s: address 0x%08x is not 8-byte aligned", where, a);
        char hint[96];
        preset_hint(a, hint, sizeof hint);
        return pk_fail(ctx, PK_ERR_PARSE, "%s: address 0x%08x lies in no region%s", where, a, hint);
    }
    for (uint32_t r = 0; r < layout.n_regions; r++) {
        uint64_t cap = (uint64_t)regions->region[r].max_instances * regions->region[r].instance_entries;
        if (counts[r] > cap) return pk_memsort_capacity_error(ctx, &layout, regions, trace, (int)r, counts[r]);
    }
    return PK_OK;
}

/* dir/mem_addr_NNNN.bin; dir without trailing slashes (the readers and
 * the writer strip them on the way in, pk_dir_name) */
static char *chunk_path(const char *dir, uint32_t c) {
    size_t len = strlen(dir) + 32;
    char *p = malloc(len);
    if (p) snprintf(p, len, "%s/" CHUNK_PREFIX "%04u" CHUNK_SUFFIX, dir, c);
    return p;
}

/* The highest chunk number among the directory's mem_addr_NNNN.bin files
 * (four digits, as the files are named), and how many there are; -1 when
 * the directory cannot be read. A name of that form with another number of
 * digits (mem_addr_00001.bin), or with four characters that are not all
 * digits (mem_addr_000a.bin), goes to odd[] (the first such name): read as
 * a chunk it would be misplaced, left out a trace would be short. */
static int scan_dir(const char *dir, long *max_index, long *count, char *odd, size_t odd_size, unsigned char *present) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    *max_index = -1;
    *count = 0;
    odd[0] = '\0';
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        const char *name = e->d_name;
        size_t len = strlen(name), lp = strlen(CHUNK_PREFIX), ls = strlen(CHUNK_SUFFIX);
        if (len <= lp + ls || strncmp(name, CHUNK_PREFIX, lp) != 0 || strcmp(name + len - ls, CHUNK_SUFFIX) != 0)
            continue;
        long idx = 0;
        size_t k;
        for (k = lp; k < len - ls; k++) {
            if (name[k] < '0' || name[k] > '9') break;
            if (k - lp < 4) idx = idx * 10 + (name[k] - '0');
        }
        /* digits, but not four (mem_addr_00001.bin), or four characters,
         * not all digits (mem_addr_000a.bin); a longer name that is not
         * digits (mem_addr_0001_old.bin) is some other file */
        int all_digits = k == len - ls, four = len - ls - lp == 4;
        if (!all_digits && !four) continue;
        if (!all_digits || k - lp != 4) {
            if (!odd[0]) snprintf(odd, odd_size, "%s", name);
            continue;
        }
        (*count)++;
        if (idx > *max_index) *max_index = idx;
        if (present) present[idx] = 1;
    }
    closedir(d);
    return 0;
}

/* scan_dir, with its errors: a folder that cannot be read, a chunk-like
 * name of another number of digits. */
static pk_status scan_chunks(pk_context *ctx, const char *dir, long *max_index, long *count, unsigned char *present) {
    char odd[256];
    if (scan_dir(dir, max_index, count, odd, sizeof odd, present))
        return pk_fail(ctx, PK_ERR_IO, "%s: cannot read the directory: %s", dir, strerror(errno));
    if (odd[0])
        return pk_fail(ctx, PK_ERR_PARSE,
                       "%s/%s: not a chunk file name: chunk files are numbered with four digits (" CHUNK_PREFIX
                       "0000" CHUNK_SUFFIX " to " CHUNK_PREFIX "4095" CHUNK_SUFFIX
                       "); rename it or move it out of the folder",
                       dir, odd);
    return PK_OK;
}

/* The error for a chunk file numbered past the last a trace may have. */
static pk_status chunk_past_last(pk_context *ctx, const char *dir, long index, const char *why) {
    return pk_fail(ctx, PK_ERR_PARSE,
                   "%s/" CHUNK_PREFIX "%04ld" CHUNK_SUFFIX
                   ": chunk numbers end at %04d (at most %d chunks); %srename it or move it out of the folder",
                   dir, index, PK_MEMSORT_MAX_CHUNKS - 1, PK_MEMSORT_MAX_CHUNKS, why);
}

pk_status pk_memsort_trace_read(pk_context *ctx, const char *dir, const pk_memsort_regions *regions,
                                pk_memsort_trace *out) {
    pk_clear(ctx);
    if (!out) return pk_fail(ctx, PK_ERR_INVALID, "pk_memsort_trace_read: out is NULL");
    memset(out, 0, sizeof *out);
    if (!dir) return pk_fail(ctx, PK_ERR_INVALID, "pk_memsort_trace_read: dir is NULL");
    if (!regions) return pk_fail(ctx, PK_ERR_INVALID, "pk_memsort_trace_read: regions is NULL");
    char dir_buf[4096];
    dir = pk_dir_name(dir, dir_buf, sizeof dir_buf);
    pk_status st = pk_memsort_regions_check(ctx, regions);
    if (st) return st;
    long max_index, count;
    if ((st = scan_chunks(ctx, dir, &max_index, &count, NULL)) != PK_OK) return st;
    if (count == 0)
        return pk_fail(ctx, PK_ERR_IO, "%s: no chunk files (" CHUNK_PREFIX "0000" CHUNK_SUFFIX ", ...)", dir);
    if (max_index >= PK_MEMSORT_MAX_CHUNKS) return chunk_past_last(ctx, dir, max_index, "");
    uint32_t n_chunks = (uint32_t)max_index + 1;
    uint64_t *sizes = calloc(n_chunks, sizeof(uint64_t));
    out->chunk_start = calloc((size_t)n_chunks + 1, sizeof(uint64_t));
    if (!sizes || !out->chunk_start) {
        free(sizes);
        free(out->chunk_start);
        out->chunk_start = NULL;
        return pk_fail(ctx, PK_ERR_NOMEM, "%s: out of memory", dir);
    }
    uint64_t total = 0;
    for (uint32_t c = 0; c < n_chunks; c++) {
        char *path = chunk_path(dir, c);
        struct stat sb;
        if (!path) {
            st = pk_fail(ctx, PK_ERR_NOMEM, "out of memory");
            goto fail;
        }
        if (stat(path, &sb) != 0) {
            struct stat lb;
            if (errno == ENOENT && lstat(path, &lb) == 0)
                st = pk_fail(ctx, PK_ERR_IO, "%s: cannot open: a link to a file that does not exist", path);
            else if (errno == ENOENT)
                st = pk_fail(ctx, PK_ERR_PARSE,
                             "%s: missing chunk in the sequence (" CHUNK_PREFIX "%04ld" CHUNK_SUFFIX " exists)", path,
                             max_index);
            else st = pk_fail(ctx, PK_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
            free(path);
            goto fail;
        }
        if (!S_ISREG(sb.st_mode)) {
            st = pk_fail(ctx, PK_ERR_IO, "%s: not a regular file%s", path, S_ISDIR(sb.st_mode) ? " (a directory)" : "");
            free(path);
            goto fail;
        }
        if (sb.st_size % 4) {
            st = pk_fail(ctx, PK_ERR_PARSE,
                         "%s: truncated: %lld bytes is not a multiple of 4 (entry %lld is incomplete)", path,
                         (long long)sb.st_size, (long long)(sb.st_size / 4));
            free(path);
            goto fail;
        }
        free(path);
        sizes[c] = (uint64_t)sb.st_size / 4;
        out->chunk_start[c] = total;
        total += sizes[c];
    }
    out->chunk_start[n_chunks] = total;
    out->n_chunks = n_chunks;
    out->n_entries = total;
    if (total >= (1ull << 32)) {
        st = pk_fail(ctx, PK_ERR_PARSE, "%s: %llu entries, at most 2^32 - 1 allowed", dir, (unsigned long long)total);
        goto fail;
    }
    out->addr = pk_memsort_big_alloc((total + 1) * sizeof(uint32_t));
    if (!out->addr) {
        st = pk_fail(ctx, PK_ERR_NOMEM, "%s: out of memory for %llu entries", dir, (unsigned long long)total);
        goto fail;
    }
    {
        /* the files read side by side (each into its place); the first
         * failure in chunk order is the one reported */
        uint32_t first_bad = n_chunks;
        int bad_errno = 0;
        size_t bad_got = 0;
#pragma omp parallel for schedule(dynamic, 1) num_threads(pk_thread_count(ctx))
        for (int64_t c = 0; c < (int64_t)n_chunks; c++) {
            char *path = chunk_path(dir, (uint32_t)c);
            FILE *fp = path ? fopen(path, "rb") : NULL;
            int e = errno;
            size_t got = fp ? fread(out->addr + out->chunk_start[c], sizeof(uint32_t), sizes[c], fp) : 0;
            if (fp) fclose(fp);
            free(path);
            if (!fp || got != sizes[c]) {
#pragma omp critical(pk_memsort_trace_read_error)
                if ((uint32_t)c < first_bad) {
                    first_bad = (uint32_t)c;
                    bad_errno = fp ? 0 : e;
                    bad_got = got;
                }
            }
        }
        if (first_bad < n_chunks) {
            char *path = chunk_path(dir, first_bad);
            if (bad_errno) st = pk_fail(ctx, PK_ERR_IO, "%s: cannot open: %s", path ? path : dir, strerror(bad_errno));
            else st = pk_fail(ctx, PK_ERR_IO, "%s: short read at entry %zu", path ? path : dir, bad_got);
            free(path);
            goto fail;
        }
    }
    if (!host_is_little_endian()) {
        for (uint64_t i = 0; i < total; i++) {
            uint32_t v = out->addr[i];
            out->addr[i] = (v >> 24) | ((v >> 8) & 0xff00u) | ((v << 8) & 0xff0000u) | (v << 24);
        }
    }
    free(sizes);
    if ((st = pk_memsort_trace_check(ctx, regions, out)) != PK_OK) {
        /* name the directory too */
        char msg[PK_MESSAGE_MAX];
        snprintf(msg, sizeof msg, "%s", ctx ? ctx->message : "");
        pk_memsort_trace_free(out);
        return pk_fail(ctx, st, "%s/%s", dir, msg);
    }
    return PK_OK;
fail:
    free(sizes);
    pk_memsort_trace_free(out);
    return st;
}

/* One chunk file a worker holds, into ch (ch->index set): its size against
 * the plans' chunk table, its entries read and checked. An error goes to
 * ctx (the file's own context); ch->addr is then NULL. */
static pk_status read_held_chunk(pk_context *ctx, const char *dir, const pk_memsort_result *plans,
                                 const pk_memsort_layout *layout, pk_memsort_chunk *ch) {
    pk_status st = PK_OK;
    uint32_t c = ch->index;
    char *path = chunk_path(dir, c);
    struct stat sb;
    /* opened without waiting (a FIFO's plain open would wait for a
     * writer), its type checked on what was opened, then read blocking */
    int fd = path ? open(path, O_RDONLY | O_NONBLOCK) : -1;
    int open_errno = errno, found = 0;
    if (fd >= 0) {
        if (fstat(fd, &sb) == 0) found = 1;
        else open_errno = errno;
    }
    int regular = found && S_ISREG(sb.st_mode);
    FILE *fp = NULL;
    if (regular) {
        int flags = fcntl(fd, F_GETFL);
        if (flags != -1 && fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) == 0) fp = fdopen(fd, "rb");
        if (!fp) open_errno = errno;
    }
    if (fd >= 0 && !fp) close(fd);
    uint64_t want = plans->chunk_start[c + 1] - plans->chunk_start[c];
    ch->first_position = plans->chunk_start[c];
    ch->addr = NULL;
    ch->n_entries = want;
    if (!path) {
        st = pk_fail(ctx, PK_ERR_NOMEM, "out of memory");
    } else if (!found) {
        st = pk_fail(ctx, PK_ERR_IO, "%s: cannot open: %s", path, strerror(open_errno));
    } else if (!regular) {
        st = pk_fail(ctx, PK_ERR_IO, "%s: not a regular file%s", path, S_ISDIR(sb.st_mode) ? " (a directory)" : "");
    } else if (!fp) {
        st = pk_fail(ctx, PK_ERR_IO, "%s: cannot open: %s", path, strerror(open_errno));
    } else if (sb.st_size % 4) {
        st = pk_fail(ctx, PK_ERR_PARSE, "%s: truncated: %lld bytes is not a multiple of 4 (entry %lld is incomplete)",
                     path, (long long)sb.st_size, (long long)(sb.st_size / 4));
    } else if ((uint64_t)sb.st_size / 4 != want) {
        st = pk_fail(
            ctx, PK_ERR_PARSE,
            "%s: %llu entries, but chunk %u of the plans' trace has %llu: not the trace the plans were made from", path,
            (unsigned long long)sb.st_size / 4, c, (unsigned long long)want);
    } else {
        uint32_t *addr = malloc((want + 1) * sizeof(uint32_t));
        if (!addr) {
            st = pk_fail(ctx, PK_ERR_NOMEM, "%s: out of memory for %llu entries", path, (unsigned long long)want);
        } else if (fread(addr, sizeof(uint32_t), want, fp) != want) {
            st = pk_fail(ctx, PK_ERR_IO, "%s: short read: %s", path, ferror(fp) ? strerror(errno) : "end of file");
            free(addr);
        } else {
            if (!host_is_little_endian())
                for (uint64_t i = 0; i < want; i++) {
                    uint32_t v = addr[i];
                    addr[i] = (v >> 24) | ((v >> 8) & 0xff00u) | ((v << 8) & 0xff0000u) | (v << 24);
                }
            /* the first entry misaligned or in no region */
            uint64_t counts[PK_MEMSORT_MAX_REGIONS] = {0};
            uint64_t first_bad = first_bad_threads(pk_thread_count(ctx), layout, addr, want, counts);
            if (first_bad < want) {
                uint32_t a = addr[first_bad];
                char hint[96] = "";
                if (!(a & 7)) preset_hint(a, hint, sizeof hint);
                st = pk_fail(ctx, PK_ERR_PARSE, "%s entry %llu: address 0x%08x %s%s", path,
                             (unsigned long long)first_bad, a, (a & 7) ? "is not 8-byte aligned" : "lies in no region",
                             hint);
                free(addr);
            } else {
                ch->addr = addr;
            }
        }
    }
    if (fp) fclose(fp);
    free(path);
    return st;
}

pk_status pk_memsort_chunks_read(pk_context *ctx, const char *dir, const pk_memsort_regions *regions,
                                 const pk_memsort_result *plans, pk_memsort_chunk **chunks_out, uint32_t *n_out) {
    pk_clear(ctx);
    if (!chunks_out || !n_out)
        return pk_fail(ctx, PK_ERR_INVALID, "pk_memsort_chunks_read: %s is NULL", !chunks_out ? "chunks" : "n_chunks");
    *chunks_out = NULL;
    *n_out = 0;
    if (!dir) return pk_fail(ctx, PK_ERR_INVALID, "pk_memsort_chunks_read: dir is NULL");
    if (!regions) return pk_fail(ctx, PK_ERR_INVALID, "pk_memsort_chunks_read: regions is NULL");
    if (!plans) return pk_fail(ctx, PK_ERR_INVALID, "pk_memsort_chunks_read: plans is NULL");
    char dir_buf[4096];
    dir = pk_dir_name(dir, dir_buf, sizeof dir_buf);
    pk_status st = pk_memsort_regions_check(ctx, regions);
    if (st) return st;
    if (!plans->chunk_start || plans->n_chunks < 1 || plans->n_chunks > PK_MEMSORT_MAX_CHUNKS)
        return pk_fail(ctx, PK_ERR_INVALID, "the plans have no chunk table (chunk_start)");
    unsigned char *present = calloc(10000, 1);
    if (!present) return pk_fail(ctx, PK_ERR_NOMEM, "out of memory");
    long max_index, count;
    if ((st = scan_chunks(ctx, dir, &max_index, &count, present)) != PK_OK) {
        free(present);
        return st;
    }
    if (count == 0) {
        free(present);
        return pk_fail(ctx, PK_ERR_IO, "%s: no chunk files (" CHUNK_PREFIX "NNNN" CHUNK_SUFFIX ")", dir);
    }
    if (max_index >= (long)plans->n_chunks) {
        free(present);
        return pk_fail(ctx, PK_ERR_PARSE,
                       "%s/" CHUNK_PREFIX "%04ld" CHUNK_SUFFIX ": the plans' trace has %u chunks (" CHUNK_PREFIX
                       "0000" CHUNK_SUFFIX " to " CHUNK_PREFIX "%04u" CHUNK_SUFFIX "): not a chunk of that trace",
                       dir, max_index, plans->n_chunks, plans->n_chunks - 1);
    }
    pk_memsort_chunk *chunks = calloc((size_t)count, sizeof *chunks);
    if (!chunks) {
        free(present);
        return pk_fail(ctx, PK_ERR_NOMEM, "out of memory");
    }
    pk_memsort_layout layout;
    pk_memsort_layout_make(regions, &layout);
    uint32_t n = 0;
    for (uint32_t c = 0; c < plans->n_chunks; c++)
        if (present[c]) chunks[n++].index = c;
    /* the files read side by side, each thread its own; with fewer files
     * than threads, one at a time with the threads checking its entries.
     * Each file's error goes to its own context; the first in chunk
     * order is the one reported. */
    int nt = pk_thread_count(ctx);
    int side_by_side = n >= (uint32_t)nt;
    pk_context *errs = calloc(n + 1, sizeof *errs);
    pk_status *sts = calloc(n + 1, sizeof *sts);
    if (!errs || !sts) {
        free(errs);
        free(sts);
        free(present);
        free(chunks);
        return pk_fail(ctx, PK_ERR_NOMEM, "out of memory");
    }
#pragma omp parallel for schedule(dynamic, 1) num_threads(side_by_side ? nt : 1)
    for (int64_t k = 0; k < (int64_t)n; k++) {
        pk_context_init(&errs[k]);
        errs[k].n_threads = side_by_side ? 1 : nt;
        sts[k] = read_held_chunk(&errs[k], dir, plans, &layout, &chunks[k]);
    }
    for (uint32_t k = 0; k < n && st == PK_OK; k++)
        if (sts[k] != PK_OK) st = pk_fail(ctx, sts[k], "%s", errs[k].message);
    free(errs);
    free(sts);
    free(present);
    if (st) {
        pk_memsort_chunks_free(chunks, n);
        return st;
    }
    *chunks_out = chunks;
    *n_out = n;
    return PK_OK;
}

void pk_memsort_chunks_free(pk_memsort_chunk *chunks, uint32_t n_chunks) {
    for (uint32_t c = 0; chunks && c < n_chunks; c++) free((void *)chunks[c].addr);
    free(chunks);
}

/* Every chunk goes to a temporary file first; only when all of them are on
 * disk are they renamed into place, and the chunk files of an older,
 * longer trace removed. A failure (a full disk, a rename refused) or a
 * cancellation removes the temporary files and leaves the folder as it
 * was, never a partial or mixed trace. */
pk_status pk_memsort_chunk_writer_begin(pk_context *ctx, pk_memsort_chunk_writer *w, const char *dir,
                                        uint32_t n_chunks) {
    memset(w, 0, sizeof *w);
    if (strlen(dir) >= sizeof w->dir_buf)
        return pk_fail(ctx, PK_ERR_INVALID, "%.64s...: the folder name is too long", dir);
    dir = pk_dir_name(dir, w->dir_buf, sizeof w->dir_buf);
    if (dir != w->dir_buf) snprintf(w->dir_buf, sizeof w->dir_buf, "%s", dir);
    dir = w->dir_buf;
    if (n_chunks < 1 || n_chunks > PK_MEMSORT_MAX_CHUNKS)
        return pk_fail(ctx, PK_ERR_INVALID, "%s: a trace of %u chunks cannot be written (1 to %d)", dir, n_chunks,
                       PK_MEMSORT_MAX_CHUNKS);
    pk_status st_dir = pk_dir_make(ctx, dir, "the folder for the chunk files mem_addr_NNNN.bin", &w->created);
    if (st_dir) return st_dir;
    struct stat sb;
    {
        /* a file that pk_memsort_trace_read would refuse (mem_addr_00001.bin)
         * would leave the folder unreadable as a trace: refused first */
        long max_index, count;
        pk_status st_scan = scan_chunks(ctx, dir, &max_index, &count, NULL);
        if (st_scan) return st_scan;
        /* ... as would a chunk number past the last a trace may have
         * (mem_addr_9999.bin), which the new trace would not replace ... */
        if (max_index >= PK_MEMSORT_MAX_CHUNKS)
            return chunk_past_last(ctx, dir, max_index, "a trace written beside it would not read back: ");
        /* ... and so would a folder (or anything not a file) under the
         * name of a chunk past the new trace's last, which the removal of
         * the older trace's chunks would leave (a name the new trace
         * takes fails its rename, and the older chunks are put back) */
        /* a chunk name that is a symbolic link: the new chunk would be
         * written where it leads, perhaps into another trace */
        for (uint32_t c = 0; c < n_chunks && (long)c <= max_index; c++) {
            char *path = chunk_path(dir, c);
            if (!path) return pk_fail(ctx, PK_ERR_NOMEM, "out of memory");
            int link = lstat(path, &sb) == 0 && S_ISLNK(sb.st_mode);
            if (link)
                st_scan = pk_fail(ctx, PK_ERR_IO,
                                  "%s: a symbolic link; chunk files are written into the trace's own folder: remove "
                                  "the link first",
                                  path);
            free(path);
            if (link) return st_scan;
        }
        for (long c = (long)n_chunks; c <= max_index; c++) {
            char *path = chunk_path(dir, (uint32_t)c);
            if (!path) return pk_fail(ctx, PK_ERR_NOMEM, "out of memory");
            int odd = stat(path, &sb) == 0 && !S_ISREG(sb.st_mode);
            if (odd)
                st_scan = pk_fail(ctx, PK_ERR_IO,
                                  "%s: not a regular file (%s); a trace written beside it would not read back: move "
                                  "it out of the folder",
                                  path, S_ISDIR(sb.st_mode) ? "a directory" : "a special file");
            free(path);
            if (odd) return st_scan;
        }
    }
    w->tmp = calloc(n_chunks, sizeof *w->tmp);
    if (!w->tmp) {
        pk_memsort_chunk_writer_abort(w);
        return pk_fail(ctx, PK_ERR_NOMEM, "out of memory");
    }
    w->n_chunks = n_chunks;
    w->le = host_is_little_endian();
    return PK_OK;
}

pk_status pk_memsort_chunk_writer_put(pk_context *ctx, pk_memsort_chunk_writer *w, const uint32_t *addr, uint64_t n) {
    if (w->next >= w->n_chunks)
        return pk_fail(ctx, PK_ERR_INVALID, "%s: more than the %u chunks announced", w->dir_buf, w->n_chunks);
    uint32_t c = w->next;
    char *path = chunk_path(w->dir_buf, c);
    if (!path) return pk_fail(ctx, PK_ERR_NOMEM, "out of memory");
    pk_atomic_file f;
    pk_status st = pk_atomic_open(ctx, &f, path);
    if (st != PK_OK) {
        free(path);
        return st;
    }
    errno = 0;
    if (w->le) {
        fwrite(addr, sizeof(uint32_t), n, f.fp);
    } else {
        for (uint64_t i = 0; i < n; i++) {
            uint32_t v = addr[i];
            unsigned char bytes[4] = {(unsigned char)v, (unsigned char)(v >> 8), (unsigned char)(v >> 16),
                                      (unsigned char)(v >> 24)};
            fwrite(bytes, 1, 4, f.fp);
        }
    }
    int failed = ferror(f.fp) || fflush(f.fp) != 0 || fsync(fileno(f.fp)) != 0;
    int saved_errno = errno;
    if (fclose(f.fp) != 0 && !failed) failed = 1, saved_errno = errno;
    f.fp = NULL;
    w->tmp[c] = f.tmp_path;
    w->next = c + 1;
    f.tmp_path = NULL;
    pk_atomic_abort(&f); /* frees the names; the temporary file stays in tmp[c] */
    if (failed)
        st = pk_fail(ctx, PK_ERR_IO, "%s: write failed: %s", path,
                     saved_errno ? strerror(saved_errno) : pk_earlier_write_failure());
    free(path);
    return st;
}

/* all into place or none: should a rename fail, the chunks already
 * renamed get their older files back */
pk_status pk_memsort_chunk_writer_commit(pk_context *ctx, pk_memsort_chunk_writer *w) {
    pk_status st = PK_OK;
    if (w->next != w->n_chunks) {
        st = pk_fail(ctx, PK_ERR_INVALID, "%s: %u of the %u chunks written", w->dir_buf, w->next, w->n_chunks);
        pk_memsort_chunk_writer_abort(w);
        return st;
    }
    char **final = calloc(w->n_chunks, sizeof *final);
    int ok = final != NULL;
    for (uint32_t c = 0; ok && c < w->n_chunks; c++) ok = (final[c] = chunk_path(w->dir_buf, c)) != NULL;
    if (!ok) {
        st = pk_fail(ctx, PK_ERR_NOMEM, "out of memory");
    } else {
        int bad = pk_rename_all((int)w->n_chunks, w->tmp, final);
        if (bad >= 0)
            st = pk_fail(ctx, PK_ERR_IO, "%s: cannot rename into place: %s; no chunk file changed", final[bad],
                         strerror(errno));
        for (uint32_t c = 0; bad < 0 && c < w->n_chunks; c++) {
            free(w->tmp[c]);
            w->tmp[c] = NULL;
        }
    }
    for (uint32_t c = 0; final && c < w->n_chunks; c++) free(final[c]);
    free(final);
    for (uint32_t c = w->n_chunks; c < PK_MEMSORT_MAX_CHUNKS && st == PK_OK; c++) {
        char *path = chunk_path(w->dir_buf, c);
        if (path) unlink(path);
        free(path);
    }
    if (st == PK_OK) w->created = 0; /* the folder stays, holding the trace */
    pk_memsort_chunk_writer_abort(w);
    return st;
}

void pk_memsort_chunk_writer_abort(pk_memsort_chunk_writer *w) {
    for (uint32_t c = 0; w->tmp && c < w->n_chunks; c++) {
        if (w->tmp[c]) unlink(w->tmp[c]);
        free(w->tmp[c]);
    }
    free(w->tmp);
    w->tmp = NULL;
    w->n_chunks = w->next = 0;
    if (w->created) rmdir(w->dir_buf); /* a folder this writer made, left empty */
    w->created = 0;
}

pk_status pk_memsort_trace_write(pk_context *ctx, const char *dir, const pk_memsort_trace *trace) {
    pk_clear(ctx);
    if (!dir) return pk_fail(ctx, PK_ERR_INVALID, "pk_memsort_trace_write: dir is NULL");
    if (!trace) return pk_fail(ctx, PK_ERR_INVALID, "pk_memsort_trace_write: trace is NULL");
    char dir_buf[4096];
    const char *name = pk_dir_name(dir, dir_buf, sizeof dir_buf);
    /* a trace as pk_memsort_trace_read would give: 1 .. 4096 chunks whose
     * starts run from 0 to n_entries without going back */
    if (trace->n_chunks < 1 || trace->n_chunks > PK_MEMSORT_MAX_CHUNKS || !trace->chunk_start ||
        (trace->n_entries && !trace->addr))
        return pk_fail(ctx, PK_ERR_INVALID, "%s: a trace of %u chunks cannot be written (1 to %d, with addresses)",
                       name, trace->n_chunks, PK_MEMSORT_MAX_CHUNKS);
    for (uint32_t c = 0; c < trace->n_chunks; c++)
        if (trace->chunk_start[c] > trace->chunk_start[c + 1] || (c == 0 && trace->chunk_start[0] != 0))
            return pk_fail(ctx, PK_ERR_INVALID, "%s: chunk %u of the trace starts at %llu and ends at %llu", name, c,
                           (unsigned long long)trace->chunk_start[c], (unsigned long long)trace->chunk_start[c + 1]);
    if (trace->chunk_start[trace->n_chunks] != trace->n_entries)
        return pk_fail(ctx, PK_ERR_INVALID, "%s: the trace's chunks hold %llu entries, not its %llu", name,
                       (unsigned long long)trace->chunk_start[trace->n_chunks], (unsigned long long)trace->n_entries);
    pk_memsort_chunk_writer w;
    pk_status st = pk_memsort_chunk_writer_begin(ctx, &w, dir, trace->n_chunks);
    if (st) return st;
    for (uint32_t c = 0; c < trace->n_chunks && st == PK_OK; c++) {
        uint64_t b = trace->chunk_start[c], e = trace->chunk_start[c + 1];
        st = pk_memsort_chunk_writer_put(ctx, &w, trace->addr + b, e - b);
        if (st == PK_OK && ctx && ctx->progress &&
            ctx->progress(ctx->progress_user, (double)(c + 1) / (double)trace->n_chunks))
            st = pk_fail(ctx, PK_ERR_CANCELLED, "%s: cancelled; no chunk file written", w.dir_buf);
    }
    if (st == PK_OK) return pk_memsort_chunk_writer_commit(ctx, &w);
    pk_memsort_chunk_writer_abort(&w);
    return st;
}

pk_status pk_memsort_trace_pin(pk_context *ctx, pk_memsort_trace *trace) {
    pk_clear(ctx);
    if (!trace) return pk_fail(ctx, PK_ERR_INVALID, "pk_memsort_trace_pin: trace is NULL");
#ifdef PK_HAVE_CUDA
    /* nothing to pin for: no device, or one that takes no context (auto then sorts on the CPU) */
    if (trace->pinned || trace->n_entries == 0 || pk_cuda_unusable(ctx ? ctx->cuda_device : 0)) return PK_OK;
    /* the n entries only: a caller's array need hold no more */
    if (pk_memsort_cuda_host_register(trace->addr, trace->n_entries * sizeof(uint32_t)) != 0)
        return pk_fail(ctx, PK_ERR_CUDA, "cudaHostRegister of the %llu-entry trace failed",
                       (unsigned long long)trace->n_entries);
    trace->pinned = 1;
#else
    (void)ctx;
    (void)trace;
#endif
    return PK_OK;
}

void pk_memsort_trace_unpin(pk_memsort_trace *trace) {
    if (!trace) return;
#ifdef PK_HAVE_CUDA
    if (trace->pinned) pk_memsort_cuda_host_unregister(trace->addr);
#endif
    trace->pinned = 0;
}

void pk_memsort_trace_free(pk_memsort_trace *trace) {
    if (!trace) return;
    pk_memsort_trace_unpin(trace);
    pk_aligned_free(trace->addr);
    free(trace->chunk_start);
    memset(trace, 0, sizeof *trace);
}
