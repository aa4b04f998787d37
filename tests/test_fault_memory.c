/* test_fault_memory.c - out of host memory and the size limits. Each
 * workload gets an input too large for the address space the command is
 * given (ulimit -v in a subshell, so that allocations fail for real) and
 * must answer with a clear error, never a crash; inputs beyond the
 * documented limits are refused before any work:
 *   angcorr   at most 2^31 - 1 objects a catalog (n^2 < 2^62: 64-bit
 *             counts never overflow), 10^7 bins; a count line larger than
 *             the file can hold;
 *   dftimage  images whose pixels do not fit the machine's memory;
 *             |u|, |v|, |w| up to 2^38 wavelengths;
 *   memsort   fewer than 2^32 entries, at most 4096 chunk files.
 * The address-space limit does not work under AddressSanitizer (it
 * reserves terabytes), so those cases skip in a sanitizer build. */
#include <fcntl.h>
#include <math.h>
#include <sys/stat.h>

#include "cli_util.h"
#include "pairkit/angcorr.h"
#include "pairkit/dftimage.h"
#include "pairkit/memsort.h"

#if defined(__SANITIZE_ADDRESS__)
#define PK_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define PK_TEST_ASAN 1
#endif
#endif

/* A sparse file of `bytes` NUL bytes (no disk used). */
static void sparse(const char *name, long long bytes) {
    int fd = open(cli_path(name), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || ftruncate(fd, (off_t)bytes) != 0) {
        perror(name);
        exit(1);
    }
    close(fd);
}

/* Run pairkit under ulimit -v kib (0: no limit); expect exit code 1 or 2
 * (an error, not a signal) and `fragment` in the message. */
static void expect_clean_error(const char *what, long kib, const char *args, const char *fragment) {
    int rc;
    if (kib > 0) {
        char cmd[2600];
        /* two threads: thread stacks are address space too, and the
         * limit is meant for the input, whatever the core count */
        snprintf(cmd, sizeof cmd, "cd '%s' && (ulimit -v %ld; OMP_NUM_THREADS=2 exec '%s' %s) > out.txt 2> err.txt",
                 cli_dir, kib, cli_binary(), args);
        int status = system(cmd);
        rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    } else {
        rc = cli_run(args);
    }
    char *err = cli_stderr();
    printf("%-34s exit %d: %s", what, rc, err && err[0] ? err : "(no message)\n");
    CHECK(rc == 1 || rc == 2, "%s: exit code %d (a crash is >= 128)", what, rc);
    CHECK(err && strstr(err, fragment), "%s: message lacks '%s'", what, fragment);
    free(err);
}

static void test_limits(void) {
    pk_context ctx;
    pk_context_init(&ctx);
    /* angcorr: a catalog beyond 2^31 - 1 objects, refused before its
     * arrays are touched (they are not there) */
    double dummy[2] = {0, 0};
    pk_catalog huge = {(size_t)1 << 31, dummy, dummy}, small = {1, dummy, dummy};
    pk_bins bins;
    CHECK_OK(pk_bins_default(&ctx, &bins), &ctx);
    uint64_t counts[1440];
    pk_angcorr_options cpu = {PK_BACKEND_CPU, 0};
    pk_status st = pk_angcorr_count(&ctx, &cpu, &huge, NULL, &bins, counts, NULL);
    printf("angcorr count of 2^31 objects: %s\n", ctx.message);
    CHECK(st == PK_ERR_INVALID && strstr(ctx.message, "2^31"), "2^31 objects: status %d", (int)st);
    st = pk_angcorr_count(&ctx, &cpu, &small, &huge, &bins, counts, NULL);
    CHECK(st == PK_ERR_INVALID, "1 x 2^31 pairs: status %d", (int)st);
    pk_angcorr_result result;
    st = pk_angcorr_run(&ctx, &cpu, &huge, &huge, &bins, PK_ESTIMATOR_LANDY_SZALAY, &result);
    CHECK(st == PK_ERR_INVALID, "run with 2^31 objects: status %d", (int)st);
    pk_bins_free(&bins);

    /* memsort: a trace of 2^32 entries */
    pk_memsort_regions regions;
    CHECK_OK(pk_memsort_regions_preset(&ctx, "default", &regions), &ctx);
    uint64_t chunk_start[2] = {0, 1ull << 32};
    uint32_t addr[1] = {0x80000000u};
    pk_memsort_trace trace = {1ull << 32, addr, 1, chunk_start, 0};
    pk_memsort_result res;
    pk_memsort_result_init(&res);
    pk_memsort_options mopts = {PK_BACKEND_CPU, 0, 1, 0};
    st = pk_memsort_run(&ctx, &mopts, &regions, &trace, &res);
    printf("memsort run of 2^32 entries: %s\n", ctx.message);
    CHECK(st == PK_ERR_INVALID && strstr(ctx.message, "2^32"), "2^32 entries: status %d", (int)st);
    pk_memsort_result_free(&res);

    /* dftimage: the size check, and baselines beyond 2^38 wavelengths */
    size_t bytes;
    st = pk_dftimage_check_size(&ctx, 10000000, 0, &bytes);
    printf("dftimage 10^7 x 10^7 pixels: %s\n", ctx.message);
    CHECK(st == PK_ERR_NOMEM && strstr(ctx.message, "GiB"), "10^7 pixels: status %d", (int)st);
    pk_vis vis;
    CHECK_OK(pk_vis_alloc(&ctx, 1, &vis), &ctx);
    vis.u[0] = 1e12, vis.v[0] = 0, vis.w[0] = 0, vis.re[0] = 1, vis.im[0] = 0;
    pk_image image;
    pk_dftimage_options dopts = {PK_BACKEND_CPU, 0, PK_PRECISION_DOUBLE, 0, 0, 0};
    st = pk_dftimage_run(&ctx, &dopts, &vis, 8, 1e-3, &image, NULL);
    printf("dftimage u = 1e12 wavelengths: %s\n", ctx.message);
    CHECK(st == PK_ERR_INVALID && strstr(ctx.message, "2^38"), "u = 1e12: status %d", (int)st);
    pk_vis_free(&vis);

    /* the command line */
    cli_write("count.txt", "99999999999999\n1 2\n");
    expect_clean_error("angcorr count line 10^14", 0, "angcorr count.txt count.txt -q --png none",
                       "count on line 1 says 99999999999999 objects");
    expect_clean_error("angcorr 10^8 bins", 0, "angcorr count.txt count.txt -q --png none --nbins 100000000",
                       "10,000,000");
    CHECK_OK(pk_vis_random(&ctx, 10, 1, &vis), &ctx);
    CHECK_OK(pk_vis_write_npz(&ctx, cli_path("ten.npz"), &vis), &ctx);
    pk_vis_free(&vis);
    expect_clean_error("dftimage --size 10^7", 0, "dftimage ten.npz -q --size 10000000 --cell 1e-8 -o x.fits", "GiB");
    mkdir(cli_path("chunks"), 0777);
    sparse("chunks/mem_addr_4096.bin", 8);
    expect_clean_error("memsort chunk 4096", 0, "memsort chunks -q -o out", "4096");
}

static void test_out_of_memory(void) {
#ifdef PK_TEST_ASAN
    printf("out-of-memory cases skipped: ulimit -v does not work under AddressSanitizer\n");
#else
    /* 300 MB inputs under a 150 MB address space: the reads cannot fit
     * whatever the libraries take; without the limit each file would be
     * refused as malformed (NUL bytes, addresses in no region). */
    sparse("big.txt", 300ll << 20);
    expect_clean_error("angcorr, 300 MB catalog, 150 MB", 150000, "angcorr big.txt big.txt -q --png none",
                       "out of memory");
    mkdir(cli_path("bigtrace"), 0777);
    sparse("bigtrace/mem_addr_0000.bin", 300ll << 20);
    expect_clean_error("memsort, 300 MB trace, 150 MB", 150000, "memsort bigtrace -q -o out --backend cpu",
                       "out of memory");
    /* an awkward trace is shuffled in place: 160 MB of it is made under
     * 250 MB (a copy for the shuffle would not fit), 320 MB is refused */
    {
        char cmd[2600];
        snprintf(cmd, sizeof cmd,
                 "cd '%s' && (ulimit -v 250000; OMP_NUM_THREADS=2 exec '%s' memsort-gen aw40 --entries 40M --awkward "
                 "-q) > out.txt 2> err.txt",
                 cli_dir, cli_binary());
        int status = system(cmd);
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "memsort-gen --awkward 40M under 250 MB: status %d",
              status);
        int n_chunks = 0;
        DIR *d = opendir(cli_path("aw40"));
        for (struct dirent *e; d && (e = readdir(d)) != NULL;) n_chunks += strncmp(e->d_name, "mem_addr_", 9) == 0;
        if (d) closedir(d);
        CHECK(n_chunks == 160, "memsort-gen --awkward 40M wrote %d chunk files, not 160", n_chunks);
        snprintf(cmd, sizeof cmd, "rm -rf '%s/aw40'", cli_dir);
        CHECK(system(cmd) == 0, "rm aw40");
    }
    expect_clean_error("memsort-gen --awkward 80M, 250 MB", 250000, "memsort-gen aw --entries 80M --awkward -q",
                       "out of memory for 83886080 entries");
    CHECK(cli_count_files("aw") == 0, "memsort-gen left a folder after running out of memory");
    /* instances of one row and 4096 chunks: the rows per (instance,
     * chunk), 2^20 x 4096 counts (16 GiB), do not fit in 2 GB; the message
     * names that table, not the rows */
    cli_write("one_row.txt",
              "ROM 0x80000000 128M 1048576 1\nINPUT 0x90000000 128M 1048576 1\n"
              "RAM 0xA0000000 512M 1048576 1\n");
    CHECK(cli_run("memsort-gen onerow --entries 2^20 --chunk 256 --regions one_row.txt -q") == 0, "memsort-gen");
    expect_clean_error(
        "memsort, one-row instances, 2 GB", 2000000, "memsort onerow --regions one_row.txt -q -o out1 --backend cpu",
        "rows per (owned instance, chunk): 4294967296 counts, 16.00 GiB (1048576 owned instances of 4096 "
        "chunks each");
    CHECK(cli_count_files("out1") == 0, "memsort wrote an output folder after running out of memory");
    /* an image of 3.2 GB under 1 GB */
    pk_context ctx;
    pk_context_init(&ctx);
    pk_vis vis;
    CHECK_OK(pk_vis_random(&ctx, 10, 1, &vis), &ctx);
    CHECK_OK(pk_vis_write_npz(&ctx, cli_path("ten.npz"), &vis), &ctx);
    pk_vis_free(&vis);
    expect_clean_error("dftimage 20000^2 pixels, 1 GB", 1000000,
                       "dftimage ten.npz -q --size 20000 --cell 1e-6 -o x.fits --backend cpu", "out of memory");
    CHECK(cli_count_files("x.fits") == 0 && cli_count_files("tmp") == 0, "files left after out of memory");
#endif
}

int main(void) {
    cli_scratch();
    test_limits();
    test_out_of_memory();
    cli_scratch_remove();
    return check_finish("test_fault_memory");
}
