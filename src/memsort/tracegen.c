/* tracegen.c - synthetic zkVM memory traces, deterministic from a seed.
 *
 * No real traces are public, so the generator imitates what a RISC-V guest
 * running an Ethereum block does to memory (docs/memsort.md): most
 * accesses hit a hot window near the stack pointer at the top of RAM; a
 * bump allocator hands out fresh heap words from the bottom of RAM, each
 * written once and touched a few more times while it is recent; memcpy-like
 * blocks read one area and write a fresh one word by word; the input is
 * read sequentially; a few read-only tables in ROM are looked up. The mix
 * (docs/memsort.md gives the shares) keeps every region inside the capacity
 * of both presets up to 2^29 entries.
 *
 * The awkward mode builds the cases that break naive planners instead.
 *
 * Invariant: the same options and region table give the same trace, bit
 * for bit, on any machine (one xorshift64* stream, no floating point in
 * any decision).
 */
#include <stdlib.h>
#include <string.h>

#include "memsort_internal.h"

#define GEN_MAX_ENTRIES (1ull << 29)

typedef struct gen_rng {
    uint64_t s;
} gen_rng;

static uint64_t rng_next(gen_rng *r) {
    r->s ^= r->s >> 12;
    r->s ^= r->s << 25;
    r->s ^= r->s >> 27;
    return r->s * 2685821657736338717ull;
}

/* Uniform in [0, n), n <= 2^32. */
static uint64_t rng_below(gen_rng *r, uint64_t n) {
    return ((rng_next(r) >> 32) * n) >> 32;
}

/* A Zipf-like index in [0, n): the product of three uniforms in 16-bit
 * fixed point, so index k is drawn about as often as 1/k^(2/3) with most
 * mass near 0. Integer only, so identical everywhere. */
static uint64_t rng_skewed(gen_rng *r, uint64_t n) {
    uint64_t x = rng_next(r);
    uint64_t a = x & 0xffff, b = (x >> 16) & 0xffff, c = (x >> 32) & 0xffff;
    uint64_t p = (((a * b) >> 16) * c) >> 16; /* in [0, 2^16) */
    return (p * n) >> 16;
}

/* Probabilities per operation in units of 1/65536, measured in the shares
 * of entries listed in docs/memsort.md. */
#define P_HEAP_RECENT 19661 /* 0.30: a read or write of a recent heap word */
#define P_ALLOC 1311        /* 0.02: a new object, its words written once */
#define P_MEMCPY 131        /* 0.002: a copy block of 8..256 words */
#define P_INPUT 2621        /* 0.04: a sequential read of 1..3 input words */
#define P_ROM 4588          /* 0.07: a table lookup in ROM */
/* the rest (0.568): the stack */

#define STACK_WINDOW_WORDS 8192 /* the stack pointer wanders this far below the top */
_Static_assert(PK_MEMSORT_GEN_MIN_LAST_WORDS == 2 * STACK_WINDOW_WORDS, "memsort.h says what a stack and a heap need");
#define STACK_HOT_WORDS 96 /* accesses land within this many words of sp */
#define RECENT_OBJECTS 64  /* heap objects still being touched */
#define ROM_TABLES 16
#define ROM_TABLE_WORDS 256
#define ROM_TABLE_STRIDE_WORDS 4096

/* Takes the n entries at a (a whole chunk, or the last); nonzero stops
 * the generator. */
typedef int (*gen_flush_fn)(void *user, const uint32_t *a, uint64_t n);

typedef struct gen_state {
    gen_rng rng;
    uint32_t *out;      /* entries base .. base + cap - 1 */
    uint64_t n, pos;    /* entries to make, made */
    uint64_t base, cap; /* with flush: out holds one chunk of cap entries */
    gen_flush_fn flush; /* NULL: out holds the whole trace */
    void *flush_user;
    int stop; /* flush said stop: emit does nothing more */
    /* regions by role */
    uint64_t rom_base, rom_words;
    uint64_t in_base, in_words, in_next;
    uint64_t ram_base, ram_words;
    uint64_t heap_next, heap_limit; /* word offsets in RAM */
    uint64_t sp;                    /* word offset in RAM */
    uint64_t recent_start[RECENT_OBJECTS], recent_len[RECENT_OBJECTS];
    uint32_t recent_head, recent_count;
} gen_state;

static void emit(gen_state *g, uint64_t base, uint64_t word) {
    if (g->pos >= g->n || g->stop) return;
    g->out[g->pos++ - g->base] = (uint32_t)(base + 8 * word);
    if (g->flush && g->pos - g->base == g->cap) {
        if (g->flush(g->flush_user, g->out, g->cap)) g->stop = 1;
        g->base = g->pos;
    }
}

static uint64_t heap_alloc(gen_state *g, uint64_t words) {
    if (g->heap_next + words > g->heap_limit) g->heap_next = 0; /* the allocator reuses freed memory */
    uint64_t start = g->heap_next;
    g->heap_next += words;
    g->recent_start[g->recent_head] = start;
    g->recent_len[g->recent_head] = words;
    g->recent_head = (g->recent_head + 1) % RECENT_OBJECTS;
    if (g->recent_count < RECENT_OBJECTS) g->recent_count++;
    return start;
}

static void gen_realistic(gen_state *g) {
    g->heap_next = 0;
    g->sp = g->ram_words - 64;
    heap_alloc(g, 16);
    while (g->pos < g->n && !g->stop) {
        uint64_t u = rng_next(&g->rng) & 0xffff;
        if (u < P_HEAP_RECENT) {
            /* the newest objects are touched the most */
            uint32_t back = (uint32_t)rng_skewed(&g->rng, g->recent_count);
            uint32_t slot = (g->recent_head + RECENT_OBJECTS - 1 - back) % RECENT_OBJECTS;
            emit(g, g->ram_base, g->recent_start[slot] + rng_below(&g->rng, g->recent_len[slot]));
            continue;
        }
        u -= P_HEAP_RECENT;
        if (u < P_ALLOC) {
            uint64_t words = 2 + rng_below(&g->rng, (rng_next(&g->rng) & 15) == 0 ? 256 : 24);
            uint64_t start = heap_alloc(g, words);
            for (uint64_t k = 0; k < words; k++) emit(g, g->ram_base, start + k);
            continue;
        }
        u -= P_ALLOC;
        if (u < P_MEMCPY) {
            uint64_t words = 8 + rng_below(&g->rng, 249);
            int from_input = g->in_words > 0 && (rng_next(&g->rng) & 7) == 0;
            uint64_t src_base = g->ram_base, src = 0;
            if (from_input) {
                src_base = g->in_base;
                if (words > g->in_words) words = g->in_words;
                src = g->in_next;
                if (src + words > g->in_words) src = 0;
                g->in_next = src + words;
            } else {
                uint32_t back = (uint32_t)rng_below(&g->rng, g->recent_count);
                uint32_t slot = (g->recent_head + RECENT_OBJECTS - 1 - back) % RECENT_OBJECTS;
                src = g->recent_start[slot];
                if (words > g->recent_len[slot]) words = g->recent_len[slot];
            }
            uint64_t dst = heap_alloc(g, words);
            for (uint64_t k = 0; k < words; k++) {
                emit(g, src_base, src + k);
                emit(g, g->ram_base, dst + k);
            }
            continue;
        }
        u -= P_MEMCPY;
        if (u < P_INPUT) {
            if (g->in_words == 0) continue;
            uint64_t words = 1 + rng_below(&g->rng, 3);
            for (uint64_t k = 0; k < words; k++) {
                if (g->in_next >= g->in_words) g->in_next = 0;
                emit(g, g->in_base, g->in_next++);
            }
            continue;
        }
        u -= P_INPUT;
        if (u < P_ROM) {
            uint64_t table = rng_skewed(&g->rng, ROM_TABLES);
            uint64_t word = (table * ROM_TABLE_STRIDE_WORDS + rng_below(&g->rng, ROM_TABLE_WORDS)) % g->rom_words;
            emit(g, g->rom_base, word);
            continue;
        }
        /* the stack: calls and returns move sp, accesses stay near it */
        uint64_t v = rng_next(&g->rng);
        if ((v & 63) == 0) {
            uint64_t frame = 4 + ((v >> 8) & 31);
            uint64_t lowest = g->ram_words - STACK_WINDOW_WORDS;
            if ((v >> 16) & 1) g->sp = g->sp >= lowest + frame ? g->sp - frame : g->sp + frame;
            else g->sp = g->sp + frame + 64 <= g->ram_words ? g->sp + frame : g->sp - frame;
        }
        uint64_t w = g->sp + rng_skewed(&g->rng, STACK_HOT_WORDS);
        if (w >= g->ram_words) w = g->ram_words - 1;
        emit(g, g->ram_base, w);
    }
}

/* Awkward cases (S = a region's rows per instance):
 *  - first region: 3 low entries, then one address S times, so its run
 *    crosses the first instance boundary, then a few entries above;
 *  - the second region of three or more stays empty;
 *  - last region: S/3 entries below one address that then appears
 *    2S + S/2 + 1 times (a run longer than an instance, part of it
 *    contiguous in the trace across chunk boundaries), and the rest
 *    scattered; the region's count is not a multiple of S, so its last
 *    instance is partial.
 * Entries are shuffled (stably testing tie order), except the contiguous
 * block. The shuffle asks ctx's progress every 2^20 entries; returns 1
 * when that asks to stop. */
#define AWKWARD_ASK_MASK ((1ull << 20) - 1)
static int gen_awkward(pk_context *ctx, gen_state *g, const pk_memsort_regions *regions) {
    uint64_t n = g->n;
    uint32_t last = regions->n_regions - 1;
    uint64_t s0 = regions->region[0].instance_entries, sl = regions->region[last].instance_entries;
    uint64_t rom_words = g->rom_words, ram_words = g->ram_words;
    uint64_t ram_cap = (uint64_t)regions->region[last].max_instances * sl;
    uint64_t rom_cap = (uint64_t)regions->region[0].max_instances * s0;
    uint64_t k = 0;
    /* how many entries each end region gets, the last region's count not
     * a multiple of S (a partial last instance) where the table has room:
     * an entry more in the first region, or one moved from it to the last */
    uint64_t rom_n = n / 4 < rom_cap ? n / 4 : rom_cap;
    if (last == 0) rom_n = 0;
    uint64_t ram_n = n - rom_n < ram_cap ? n - rom_n : ram_cap;
    if (ram_n % sl == 0 && ram_n > 1) {
        if (last == 0 || n - ram_n + 1 <= rom_cap) ram_n--; /* the first region takes what the last leaves */
        else if (ram_n < ram_cap && rom_n > 0) rom_n--, ram_n++;
    }
    /* first region */
    uint64_t rom_run = s0 < rom_n ? s0 : rom_n / 2;
    for (uint64_t i = 0; i < rom_n && k < n; i++) {
        uint64_t w;
        if (i < 3) w = i % rom_words; /* a region of one or two words repeats them */
        else if (i < 3 + rom_run) w = 5 % rom_words;
        else w = (6 + rng_below(&g->rng, 64)) % rom_words;
        g->out[k++] = (uint32_t)(g->rom_base + 8 * w);
    }
    /* last region */
    uint64_t low = sl / 3, long_run = 2 * sl + sl / 2 + 1;
    if (low + long_run > ram_n) {
        low = ram_n / 4;
        long_run = ram_n / 2;
    }
    uint64_t long_word = 100 % ram_words, ram_start = k, contiguous = long_run / 2;
    for (uint64_t i = 0; i < ram_n && k < n; i++) {
        uint64_t w;
        if (i < low) w = rng_below(&g->rng, long_word ? long_word : 1);
        else if (i < low + long_run) w = long_word;
        else w = (long_word + 1 + rng_below(&g->rng, 4096)) % ram_words;
        g->out[k++] = (uint32_t)(g->ram_base + 8 * w);
    }
    /* whatever capacity left over goes to the first region's scattered addresses */
    while (k < n) g->out[k++] = (uint32_t)(g->rom_base + 8 * ((6 + rng_below(&g->rng, 64)) % rom_words));
    /* Shuffle all but a contiguous block of the long run, which moves to
     * the middle of the trace: the rest closes up over the block, is
     * shuffled in place, and opens again around the block's new place. */
    uint64_t block_first = ram_start + low; /* contiguous: [block_first, block_first + contiguous) */
    uint64_t m = n - contiguous;
    uint32_t *rest = g->out;
    memmove(rest + block_first, rest + block_first + contiguous, (m - block_first) * sizeof(uint32_t));
    for (uint64_t i = m; i > 1; i--) {
        if ((i & AWKWARD_ASK_MASK) == 0 && ctx && ctx->progress &&
            ctx->progress(ctx->progress_user, (double)(m - i) / (double)m))
            return 1;
        uint64_t j = rng_below(&g->rng, i);
        uint32_t t = rest[i - 1];
        rest[i - 1] = rest[j];
        rest[j] = t;
    }
    uint64_t at = m / 2;
    memmove(rest + at + contiguous, rest + at, (m - at) * sizeof(uint32_t));
    uint32_t block_addr = (uint32_t)(g->ram_base + 8 * long_word);
    for (uint64_t i = 0; i < contiguous; i++) g->out[at + i] = block_addr;
    return 0;
}

/* The options' checks and the generator's state for them, without its
 * output array. */
static pk_status gen_setup(pk_context *ctx, const pk_memsort_regions *regions, const pk_memsort_gen_options *opts,
                           gen_state *g, uint64_t *chunk_out, uint64_t *n_chunks_out) {
    pk_status st = pk_memsort_regions_check(ctx, regions);
    if (st) return st;
    if (opts->n_entries == 0 || opts->n_entries > GEN_MAX_ENTRIES)
        return pk_fail(ctx, PK_ERR_INVALID, "%llu entries: outside 1 .. 2^29", (unsigned long long)opts->n_entries);
    uint64_t chunk = opts->chunk_entries ? opts->chunk_entries : PK_MEMSORT_GEN_CHUNK;
    uint64_t n_chunks = (opts->n_entries + chunk - 1) / chunk;
    if (n_chunks > PK_MEMSORT_MAX_CHUNKS)
        return pk_fail(ctx, PK_ERR_INVALID, "%llu entries in chunks of %llu make %llu chunk files, more than %d",
                       (unsigned long long)opts->n_entries, (unsigned long long)chunk, (unsigned long long)n_chunks,
                       PK_MEMSORT_MAX_CHUNKS);
    *chunk_out = chunk;
    *n_chunks_out = n_chunks;
    memset(g, 0, sizeof *g);
    g->rng.s = opts->seed * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull;
    if (g->rng.s == 0) g->rng.s = 1;
    g->n = opts->n_entries;
    uint32_t nr = regions->n_regions;
    const pk_memsort_region *rom = &regions->region[0], *ram = &regions->region[nr - 1];
    g->rom_base = rom->base;
    g->rom_words = rom->size >> 3;
    if (nr >= 3) {
        g->in_base = regions->region[1].base;
        g->in_words = regions->region[1].size >> 3;
    }
    g->ram_base = ram->base;
    g->ram_words = ram->size >> 3;
    if (nr == 1 || g->ram_words < PK_MEMSORT_GEN_MIN_LAST_WORDS) {
        /* too small for a stack and a heap: everything goes to the last region's words */
        g->heap_limit = g->ram_words / 2 ? g->ram_words / 2 : 1;
    } else {
        g->heap_limit = g->ram_words - STACK_WINDOW_WORDS;
    }
    return PK_OK;
}

/* A realistic trace (or, where the last region has no room for a stack
 * and a heap, skewed accesses over its words) through emit. */
static void gen_run(gen_state *g) {
    if (g->ram_words < PK_MEMSORT_GEN_MIN_LAST_WORDS) {
        while (g->pos < g->n && !g->stop) emit(g, g->ram_base, rng_skewed(&g->rng, g->ram_words));
    } else {
        gen_realistic(g);
    }
}

/* The generator's message for region rg over its capacity, holding count
 * entries; by says where it was seen ("" for the whole trace). */
static pk_status gen_capacity_error(pk_context *ctx, const pk_memsort_gen_options *opts, const pk_memsort_region *rg,
                                    uint64_t count, const char *by) {
    uint64_t cap = (uint64_t)rg->max_instances * rg->instance_entries;
    return pk_fail(ctx, PK_ERR_INVALID,
                   "%llu entries: the generated trace puts %llu entries in region %s%s, more than its %u "
                   "instances of %u rows allow (%llu); fewer entries or a larger table",
                   (unsigned long long)opts->n_entries, (unsigned long long)count, rg->name, by, rg->max_instances,
                   rg->instance_entries, (unsigned long long)cap);
}

/* The whole trace in memory, a chunk at a time: each full chunk moves the
 * window on (the entries stay where they were made) and asks the progress,
 * so that a long generation can be cancelled. */
typedef struct gen_in_memory {
    gen_state *g;
    pk_context *ctx;
} gen_in_memory;

static int gen_memory_chunk(void *user, const uint32_t *a, uint64_t n) {
    (void)a;
    gen_in_memory *m = user;
    m->g->out += n;
    pk_context *ctx = m->ctx;
    return ctx && ctx->progress && ctx->progress(ctx->progress_user, (double)m->g->pos / (double)m->g->n);
}

pk_status pk_memsort_generate(pk_context *ctx, const pk_memsort_regions *regions, const pk_memsort_gen_options *opts,
                              pk_memsort_trace *out) {
    pk_clear(ctx);
    if (!out) return pk_fail(ctx, PK_ERR_INVALID, "pk_memsort_generate: out is NULL");
    memset(out, 0, sizeof *out);
    if (!regions) return pk_fail(ctx, PK_ERR_INVALID, "pk_memsort_generate: regions is NULL");
    if (!opts) return pk_fail(ctx, PK_ERR_INVALID, "pk_memsort_generate: opts is NULL");
    gen_state g;
    uint64_t chunk, n_chunks;
    pk_status st = gen_setup(ctx, regions, opts, &g, &chunk, &n_chunks);
    if (st) return st;
    out->n_entries = opts->n_entries;
    out->n_chunks = (uint32_t)n_chunks;
    out->addr = pk_memsort_big_alloc((opts->n_entries + 1) * sizeof(uint32_t));
    out->chunk_start = calloc(n_chunks + 1, sizeof(uint64_t));
    if (!out->addr || !out->chunk_start) {
        pk_memsort_trace_free(out);
        return pk_fail(ctx, PK_ERR_NOMEM, "out of memory for %llu entries", (unsigned long long)opts->n_entries);
    }
    for (uint64_t c = 0; c <= n_chunks; c++)
        out->chunk_start[c] = c * chunk < opts->n_entries ? c * chunk : opts->n_entries;
    g.out = out->addr;
    g.cap = g.n;
    uint32_t nr = regions->n_regions;
    if (opts->awkward) {
        if (gen_awkward(ctx, &g, regions)) {
            pk_memsort_trace_free(out);
            return pk_fail(ctx, PK_ERR_CANCELLED, "cancelled");
        }
    } else {
        gen_in_memory m = {&g, ctx};
        g.cap = chunk < g.n ? chunk : g.n;
        g.flush = gen_memory_chunk;
        g.flush_user = &m;
        gen_run(&g);
        if (g.stop) {
            pk_memsort_trace_free(out);
            return pk_fail(ctx, PK_ERR_CANCELLED, "cancelled");
        }
        g.out = out->addr; /* the whole trace again, for the checks below */
    }
    if ((st = pk_memsort_trace_check(ctx, regions, out)) != PK_OK) {
        {
            /* the table's capacity, per region: the generator's own message
             * (the trace check's would name chunk files not yet written) */
            uint64_t count[PK_MEMSORT_MAX_REGIONS] = {0};
            for (uint64_t i = 0; i < g.n; i++)
                for (uint32_t r = 0; r < nr; r++)
                    if (g.out[i] - regions->region[r].base < regions->region[r].size) {
                        count[r]++;
                        break;
                    }
            for (uint32_t r = 0; r < nr; r++) {
                const pk_memsort_region *rg = &regions->region[r];
                uint64_t cap = (uint64_t)rg->max_instances * rg->instance_entries;
                if (count[r] <= cap) continue;
                pk_memsort_trace_free(out);
                return gen_capacity_error(ctx, opts, rg, count[r], "");
            }
        }
        char msg[PK_MESSAGE_MAX];
        snprintf(msg, sizeof msg, "%s", ctx ? ctx->message : "");
        pk_memsort_trace_free(out);
        return pk_fail(ctx, PK_ERR_INVALID, "the generated trace does not fit this region table: %s", msg);
    }
    return PK_OK;
}

/* What the generator's chunks go through on their way to the files. */
typedef struct gen_sink {
    pk_context *ctx;
    const pk_memsort_regions *regions;
    const pk_memsort_gen_options *opts;
    pk_memsort_layout layout;
    pk_memsort_chunk_writer writer;
    uint64_t counts[PK_MEMSORT_MAX_REGIONS];
    uint64_t done;
    pk_status st;
} gen_sink;

/* Each chunk checked (the same checks as pk_memsort_trace_check, the
 * region counts so far against the capacity), written, and the progress
 * asked. */
static int gen_sink_chunk(void *user, const uint32_t *a, uint64_t n) {
    gen_sink *k = user;
    uint64_t bad = pk_memsort_first_bad(&k->layout, a, n, k->counts);
    if (bad < n) {
        k->st = pk_fail(k->ctx, PK_ERR_INVALID,
                        "the generated trace does not fit this region table: entry %llu, address 0x%08x, lies in no "
                        "region or is misaligned",
                        (unsigned long long)(k->done + bad), a[bad]);
        return 1;
    }
    k->done += n;
    for (uint32_t r = 0; r < k->layout.n_regions; r++) {
        const pk_memsort_region *rg = &k->regions->region[r];
        if (k->counts[r] <= (uint64_t)rg->max_instances * rg->instance_entries) continue;
        char by[64];
        snprintf(by, sizeof by, " by entry %llu", (unsigned long long)k->done);
        k->st = gen_capacity_error(k->ctx, k->opts, rg, k->counts[r], by);
        return 1;
    }
    if ((k->st = pk_memsort_chunk_writer_put(k->ctx, &k->writer, a, n)) != PK_OK) return 1;
    pk_context *ctx = k->ctx;
    if (ctx && ctx->progress && ctx->progress(ctx->progress_user, (double)k->done / (double)k->opts->n_entries)) {
        k->st = pk_fail(ctx, PK_ERR_CANCELLED, "%s: cancelled; no chunk file written", k->writer.dir_buf);
        return 1;
    }
    return 0;
}

pk_status pk_memsort_generate_dir(pk_context *ctx, const pk_memsort_regions *regions,
                                  const pk_memsort_gen_options *opts, const char *dir) {
    pk_clear(ctx);
    if (!regions) return pk_fail(ctx, PK_ERR_INVALID, "pk_memsort_generate_dir: regions is NULL");
    if (!opts) return pk_fail(ctx, PK_ERR_INVALID, "pk_memsort_generate_dir: opts is NULL");
    if (!dir) return pk_fail(ctx, PK_ERR_INVALID, "pk_memsort_generate_dir: dir is NULL");
    if (opts->awkward) {
        /* the awkward cases shuffle the whole trace: made in memory */
        pk_memsort_trace trace;
        pk_status st = pk_memsort_generate(ctx, regions, opts, &trace);
        if (st) return st;
        st = pk_memsort_trace_write(ctx, dir, &trace);
        pk_memsort_trace_free(&trace);
        return st;
    }
    gen_state g;
    uint64_t chunk, n_chunks;
    pk_status st = gen_setup(ctx, regions, opts, &g, &chunk, &n_chunks);
    if (st) return st;
    gen_sink *sink = calloc(1, sizeof *sink);
    /* one chunk, or the whole trace where that is shorter (--chunk can
     * name up to 2^32 entries) */
    uint32_t *buf = malloc((chunk < g.n ? chunk : g.n) * sizeof(uint32_t));
    if (!sink || !buf) {
        free(sink);
        free(buf);
        return pk_fail(ctx, PK_ERR_NOMEM, "out of memory for a chunk of %llu entries", (unsigned long long)chunk);
    }
    sink->ctx = ctx;
    sink->regions = regions;
    sink->opts = opts;
    pk_memsort_layout_make(regions, &sink->layout);
    if ((st = pk_memsort_chunk_writer_begin(ctx, &sink->writer, dir, (uint32_t)n_chunks)) == PK_OK) {
        g.out = buf;
        g.cap = chunk;
        g.flush = gen_sink_chunk;
        g.flush_user = sink;
        gen_run(&g);
        if (!g.stop && g.pos > g.base) gen_sink_chunk(sink, g.out, g.pos - g.base); /* the last, partial chunk */
        st = sink->st;
        if (st == PK_OK) st = pk_memsort_chunk_writer_commit(ctx, &sink->writer);
        else pk_memsort_chunk_writer_abort(&sink->writer);
    }
    free(buf);
    free(sink);
    return st;
}
