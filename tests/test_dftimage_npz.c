/* test_dftimage_npz.c - the .npz reader and writer: a file numpy.savez
 * wrote (data/vis/lesson_small.npz), a round trip through the writer, and
 * bad input: missing arrays, mismatched lengths, NaN data, a wrong dtype, a
 * truncated zip, a file that is no zip. Bad files are made here with
 * libzip, so each holds exactly one fault. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zip.h>

#include "check.h"
#include "pairkit/dftimage.h"

/* A .npy v1.0 of n little-endian values of descr from raw bytes, of shape
 * (n,) unless shape says otherwise. */
static unsigned char *npy(const char *descr, size_t n, const void *values, size_t item, const char *shape, int fortran,
                          size_t *size) {
    char header[128], flat[32];
    snprintf(flat, sizeof flat, "(%zu,)", n);
    int len = snprintf(header, sizeof header, "{'descr': '%s', 'fortran_order': %s, 'shape': %s, }", descr,
                       fortran ? "True" : "False", shape ? shape : flat);
    size_t padded = (10 + (size_t)len + 1 + 63) / 64 * 64, hl = padded - 10;
    unsigned char *buf = malloc(padded + n * item);
    memcpy(buf, "\x93NUMPY\x01\x00", 8);
    buf[8] = (unsigned char)(hl & 0xff), buf[9] = (unsigned char)(hl >> 8);
    memcpy(buf + 10, header, (size_t)len);
    memset(buf + 10 + len, ' ', hl - (size_t)len - 1);
    buf[padded - 1] = '\n';
    memcpy(buf + padded, values, n * item);
    *size = padded + n * item;
    return buf;
}

typedef struct member {
    const char *name, *descr;
    size_t n, item;
    const void *values;
} member;

/* The members into a zip; member k of shape shape[k] (NULL, or shape NULL:
 * flat) and Fortran order when fortran[k] (fortran NULL: none). */
static void write_zip_shaped(const char *path, const member *m, int count, const char *const *shape,
                             const int *fortran) {
    int err;
    zip_t *za = zip_open(path, ZIP_CREATE | ZIP_TRUNCATE, &err);
    for (int k = 0; k < count; k++) {
        size_t size;
        unsigned char *buf =
            npy(m[k].descr, m[k].n, m[k].values, m[k].item, shape ? shape[k] : NULL, fortran ? fortran[k] : 0, &size);
        zip_file_add(za, m[k].name, zip_source_buffer(za, buf, size, 1), ZIP_FL_OVERWRITE);
    }
    zip_close(za);
}

static void write_zip(const char *path, const member *m, int count) {
    write_zip_shaped(path, m, count, NULL, NULL);
}

static void expect_error(const char *path, const char *needle, const char *what) {
    pk_context ctx;
    pk_context_init(&ctx);
    pk_vis vis;
    pk_status st = pk_vis_read(&ctx, path, PK_WEIGHTS_DATA, &vis);
    CHECK(st != PK_OK, "%s: read succeeded", what);
    CHECK(strstr(ctx.message, needle) != NULL, "%s: message '%s' lacks '%s'", what, ctx.message, needle);
    CHECK(vis.u == NULL && vis.n == 0, "%s: no visibilities left allocated", what);
    printf("%-24s -> %s\n", what, ctx.message);
}

int main(void) {
    pk_context ctx;
    pk_context_init(&ctx);

    /* numpy's own file: u = 10 k, v = -5 k, w = 0.5 k, data = k + 0.25 i k. */
    pk_vis vis;
    CHECK_OK(pk_vis_read(&ctx, "data/vis/lesson_small.npz", PK_WEIGHTS_DATA, &vis), &ctx);
    CHECK(vis.n == 37 && vis.sign == 1, "n %zu sign %d", vis.n, vis.sign);
    int exact = 1;
    for (size_t k = 0; k < vis.n; k++)
        exact &= vis.u[k] == 10.0 * (double)k && vis.v[k] == -5.0 * (double)k && vis.w[k] == 0.5 * (double)k &&
                 vis.re[k] == (double)k && vis.im[k] == 0.25 * (double)k;
    CHECK(exact, "values of the numpy-written file");

    /* Round trip through the writer. */
    char dir[] = "/tmp/pk_npz_XXXXXX";
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    char path[256];
    snprintf(path, sizeof path, "%s/round.npz", dir);
    pk_vis rnd, back;
    CHECK_OK(pk_vis_random(&ctx, 1001, 3, &rnd), &ctx);
    CHECK_OK(pk_vis_write_npz(&ctx, path, &rnd), &ctx);
    CHECK_OK(pk_vis_read(&ctx, path, PK_WEIGHTS_DATA, &back), &ctx);
    CHECK(back.n == rnd.n && memcmp(back.u, rnd.u, rnd.n * 8) == 0 && memcmp(back.w, rnd.w, rnd.n * 8) == 0 &&
              memcmp(back.re, rnd.re, rnd.n * 8) == 0 && memcmp(back.im, rnd.im, rnd.n * 8) == 0,
          "round trip");
    pk_vis_free(&back);
    /* Temporary files of the writer are gone. */
    char cmd[512];
    snprintf(cmd, sizeof cmd, "test $(ls %s | wc -l) -eq 1", dir);
    CHECK(system(cmd) == 0, "only round.npz in %s", dir);

    /* Bad files. */
    double d5[5] = {1, 2, 3, 4, 5}, d4[4] = {1, 2, 3, 4};
    double c5[10] = {1, 0, 2, 0, 3, 0, 4, 0, 5, 0}, cnan[10] = {1, 0, 2, 0, (double)NAN, 0, 4, 0, 5, 0};
    member good[4] = {{"u.npy", "<f8", 5, 8, d5},
                      {"v.npy", "<f8", 5, 8, d5},
                      {"w.npy", "<f8", 5, 8, d5},
                      {"data.npy", "<c16", 5, 16, c5}};
    snprintf(path, sizeof path, "%s/good.npz", dir);
    write_zip(path, good, 4);
    CHECK_OK(pk_vis_read(&ctx, path, PK_WEIGHTS_DATA, &back), &ctx);
    CHECK(back.n == 5 && back.re[4] == 5.0, "hand-made good file");
    pk_vis_free(&back);

    snprintf(path, sizeof path, "%s/no_w.npz", dir);
    write_zip(path, good, 2);
    expect_error(path, "'w' is missing", "missing w");

    /* the same values as (1, 5) and (5, 1) arrays, C or Fortran order: read
     * alike; a 2-D Fortran-ordered array with two long dimensions is refused */
    const char *shapes[3] = {"(1, 5)", "(5, 1)", "(5,)"};
    for (int s = 0; s < 3; s++)
        for (int f = 0; f < 2; f++) {
            const char *shape[4] = {NULL, NULL, NULL, shapes[s]};
            const int fortran[4] = {0, 0, 0, f};
            snprintf(path, sizeof path, "%s/shape.npz", dir);
            write_zip_shaped(path, good, 4, shape, fortran);
            CHECK_OK(pk_vis_read(&ctx, path, PK_WEIGHTS_DATA, &back), &ctx);
            CHECK(back.n == 5 && back.re[4] == 5.0 && back.im[4] == 0.0, "data of shape %s, fortran %d", shapes[s], f);
            pk_vis_free(&back);
        }
    double d6[6] = {1, 2, 3, 4, 5, 6}, c6[12] = {1, 0, 2, 0, 3, 0, 4, 0, 5, 0, 6, 0};
    member six[4] = {{"u.npy", "<f8", 6, 8, d6},
                     {"v.npy", "<f8", 6, 8, d6},
                     {"w.npy", "<f8", 6, 8, d6},
                     {"data.npy", "<c16", 6, 16, c6}};
    const char *shape23[4] = {"(2, 3)", NULL, NULL, "(2, 3)"};
    int fortran[4] = {0, 0, 0, 1};
    snprintf(path, sizeof path, "%s/fortran.npz", dir);
    write_zip_shaped(path, six, 4, shape23, fortran);
    expect_error(path, "'data' is stored in Fortran order with shape (2, 3)", "Fortran-ordered 2-D data");
    fortran[3] = 0;
    write_zip_shaped(path, six, 4, shape23, fortran);
    CHECK_OK(pk_vis_read(&ctx, path, PK_WEIGHTS_DATA, &back), &ctx);
    CHECK(back.n == 6 && back.re[5] == 6.0, "C-ordered 2-D arrays read flat");
    pk_vis_free(&back);
    const char *shape32[4] = {"(2, 3)", NULL, NULL, "(3, 2)"};
    write_zip_shaped(path, six, 4, shape32, fortran);
    expect_error(path, "arrays differ in shape: u is (2, 3), data is (3, 2)", "2-D arrays of other shapes");

    /* float32 u, v, w and complex64 data: each value read exactly, the
     * imaginary part from the second half of each complex64 item */
    {
        const float fu[3] = {0.1f, -1234.567f, 3.0e-3f}, fv[3] = {-0.3f, 77.7f, 1e4f}, fw[3] = {2.5f, -0.01f, 9.9f};
        const float fd[6] = {1.1f, -2.2f, 3.3f, 4.4f, -5.5f, 6.6f}; /* re, im pairs */
        member f32[4] = {{"u.npy", "<f4", 3, 4, fu},
                         {"v.npy", "<f4", 3, 4, fv},
                         {"w.npy", "<f4", 3, 4, fw},
                         {"data.npy", "<c8", 3, 8, fd}};
        snprintf(path, sizeof path, "%s/f32.npz", dir);
        write_zip(path, f32, 4);
        pk_status st = pk_vis_read(&ctx, path, PK_WEIGHTS_DATA, &back);
        CHECK_OK(st, &ctx);
        int same = st == PK_OK && back.n == 3;
        for (size_t k = 0; same && k < 3; k++)
            same = back.u[k] == (double)fu[k] && back.v[k] == (double)fv[k] && back.w[k] == (double)fw[k] &&
                   back.re[k] == (double)fd[2 * k] && back.im[k] == (double)fd[2 * k + 1];
        CHECK(same, "float32 u, v, w and complex64 data read exactly (n %zu)", back.n);
        if (st == PK_OK) pk_vis_free(&back);
    }

    /* an array whose shape promises more values than it holds */
    {
        const char *shape6[4] = {NULL, NULL, NULL, "(6,)"};
        snprintf(path, sizeof path, "%s/short.npz", dir);
        write_zip_shaped(path, good, 4, shape6, NULL);
        expect_error(path, "'data' is truncated: shape says 6 values, the file holds 5",
                     "array shorter than its shape");
    }

    member mism[4] = {good[0], good[1], {"w.npy", "<f8", 4, 8, d4}, good[3]};
    snprintf(path, sizeof path, "%s/mismatch.npz", dir);
    write_zip(path, mism, 4);
    expect_error(path, "differ in length", "mismatched lengths");

    member nan_data[4] = {good[0], good[1], good[2], {"data.npy", "<c16", 5, 16, cnan}};
    snprintf(path, sizeof path, "%s/nan.npz", dir);
    write_zip(path, nan_data, 4);
    expect_error(path, "data[2] is not finite", "NaN visibility");
    double vnan[5] = {1, 2, 3, (double)INFINITY, 5};
    member inf_v[4] = {good[0], {"v.npy", "<f8", 5, 8, vnan}, good[2], good[3]};
    snprintf(path, sizeof path, "%s/inf_v.npz", dir);
    write_zip(path, inf_v, 4);
    expect_error(path, "v[3] is not finite (inf)", "infinite v");

    member big_endian[4] = {{"u.npy", ">f8", 5, 8, d5}, good[1], good[2], good[3]};
    snprintf(path, sizeof path, "%s/bigendian.npz", dir);
    write_zip(path, big_endian, 4);
    expect_error(path, "dtype", "big-endian dtype");

    /* Truncated: the numpy file cut in half. */
    FILE *in = fopen("data/vis/lesson_small.npz", "rb");
    unsigned char buf[4096];
    size_t got = in ? fread(buf, 1, sizeof buf, in) : 0;
    if (in) fclose(in);
    snprintf(path, sizeof path, "%s/truncated.npz", dir);
    FILE *out = fopen(path, "wb");
    fwrite(buf, 1, got / 2, out);
    fclose(out);
    expect_error(path, "truncated.npz", "truncated zip");

    /* Damaged: one byte of u's values changed (the zip's CRC no longer
     * matches; the numpy header still parses, so only the CRC tells). */
    in = fopen("data/vis/lesson_small.npz", "rb");
    static unsigned char whole[1 << 20];
    got = in ? fread(whole, 1, sizeof whole, in) : 0;
    if (in) fclose(in);
    CHECK(got > 300 && memcmp(whole + 30, "u.npy", 5) == 0, "lesson_small.npz starts with u.npy");
    whole[235] ^= 0x55;
    snprintf(path, sizeof path, "%s/damaged.npz", dir);
    out = fopen(path, "wb");
    fwrite(whole, 1, got, out);
    fclose(out);
    expect_error(path, "u.npy: CRC error", "a changed byte in u");

    snprintf(path, sizeof path, "%s/text.npz", dir);
    out = fopen(path, "wb");
    fputs("u v w\n1 2 3\n", out);
    fclose(out);
    expect_error(path, "neither a .npz", "not a zip");

    snprintf(path, sizeof path, "%s/missing.npz", dir);
    expect_error(path, "No such file", "no such file");

    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0, "cleanup");
    pk_vis_free(&rnd);
    pk_vis_free(&vis);
    return check_finish("test_dftimage_npz");
}
