/* test_api_contracts.c - what the public headers promise beyond the
 * results: messages cleared by a successful call, free functions that take
 * NULL and leave an empty struct, arguments checked before anything is
 * touched, and new files given the mode any new file gets (0666 less the
 * umask) without the umask being changed. */
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "pairkit/angcorr.h"
#include "pairkit/dftimage.h"
#include "pairkit/memsort.h"

int main(void) {
    pk_context ctx;
    pk_context_init(&ctx);

    /* a successful call leaves no message behind */
    pk_bins bins;
    snprintf(ctx.message, sizeof ctx.message, "stale");
    CHECK_OK(pk_bins_linear(&ctx, 0.0, 0.01, 10, &bins), &ctx);
    CHECK(ctx.message[0] == '\0', "pk_bins_linear kept a message: %s", ctx.message);
    pk_memsort_regions regions;
    snprintf(ctx.message, sizeof ctx.message, "stale");
    CHECK_OK(pk_memsort_regions_preset(&ctx, "default", &regions), &ctx);
    CHECK(ctx.message[0] == '\0', "pk_memsort_regions_preset kept a message: %s", ctx.message);

    /* free functions: NULL, twice, and an emptied struct */
    pk_bins_free(NULL);
    pk_memsort_result_free(NULL);
    pk_memsort_trace_free(NULL);
    pk_vis_free(NULL);
    pk_image_free(NULL);
    pk_image image;
    memset(&image, 0, sizeof image);
    image.n = 8;
    image.cell = 0.001;
    image.re = malloc(64 * sizeof(double));
    pk_image_free(&image);
    pk_image_free(&image);
    CHECK(image.n == 0 && image.cell == 0 && image.re == NULL, "pk_image_free left n %zu, cell %g", image.n,
          image.cell);

    /* arguments checked first */
    pk_bins bad;
    memset(&bad, 0xab, sizeof bad);
    CHECK(pk_bins_linear(&ctx, 0.0, 1e308, 10, &bad) == PK_ERR_INVALID, "bins ending at infinity accepted");
    CHECK(bad.edges == NULL && bad.n_bins == 0, "a refused pk_bins_linear left out set");
    size_t b = 1, e = 1;
    pk_angcorr_part_rows(10, 0, 5, 4, &b, &e);
    CHECK(b == 0 && e == 0, "part 5 of 4 got rows [%zu, %zu)", b, e);
    pk_angcorr_part_rows(10, 1, -1, 4, &b, &e);
    CHECK(b == 0 && e == 0, "part -1 of 4 got rows [%zu, %zu)", b, e);
    uint64_t host = 0, device = 0;
    CHECK(pk_memsort_memory_bytes(&ctx, &regions, 1ull << 33, PK_MEMSORT_KERNEL_CPU, 2, &host, &device) ==
              PK_ERR_INVALID,
          "a memory query for 2^33 entries answered %llu bytes", (unsigned long long)host);

    /* a writer given a result of other bins refuses, before any file */
    char dir[] = "/tmp/pk_api_XXXXXX";
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    char path[256];
    snprintf(path, sizeof path, "%s/omega.out", dir);
    pk_angcorr_result result;
    memset(&result, 0, sizeof result);
    result.n_bins = 20;
    pk_status st = pk_angcorr_write_omega(&ctx, path, &result, &bins);
    CHECK(st == PK_ERR_INVALID && strstr(ctx.message, "20 bins"), "mismatched bins: status %d: %s", (int)st,
          ctx.message);
    CHECK(access(path, F_OK) != 0, "a file was written for mismatched bins");

    /* a written file has the mode of any new file; the umask is unchanged */
    mode_t old_mask = umask(027);
    result.n_bins = bins.n_bins;
    result.dd = calloc(bins.n_bins, sizeof(uint64_t));
    result.dr = calloc(bins.n_bins, sizeof(uint64_t));
    result.rr = calloc(bins.n_bins, sizeof(uint64_t));
    result.omega = calloc(bins.n_bins, sizeof(double));
    CHECK_OK(pk_angcorr_write_omega(&ctx, path, &result, &bins), &ctx);
    struct stat sb;
    CHECK(stat(path, &sb) == 0 && (sb.st_mode & 0777) == (0666 & ~027), "omega.out has mode %o, expected %o",
          (unsigned)(sb.st_mode & 0777), (unsigned)(0666 & ~027));
    mode_t now = umask(old_mask);
    CHECK(now == 027, "the umask became %o", (unsigned)now);
    free(result.dd), free(result.dr), free(result.rr), free(result.omega);
    unlink(path);
    rmdir(dir);
    pk_bins_free(&bins);
    return check_finish("test_api_contracts");
}
