/* vis_npz.c - visibilities in the .npz format of the GPU imaging lesson:
 * a zip (read and written with libzip) of the .npy arrays u, v, w (float64,
 * wavelengths) and data (complex128), as numpy.savez writes them. The .npy
 * headers are parsed here: the magic, the version, and the header's
 * 'descr', 'fortran_order' and 'shape' entries. Float32, complex64 and a
 * real 'data' array are accepted too; big-endian arrays are refused.
 */
#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zip.h>

#include "dftimage_internal.h"

typedef struct npy_array {
    char shape[64]; /* the dimensions longer than 1, as "(50, 10)": arrays are paired flat, in C order */
    size_t count;   /* elements (the product of the shape) */
    int is_complex; /* c8 / c16 */
    int item_bytes; /* 4, 8 (real) or 8, 16 (complex) */
    const unsigned char *data;
} npy_array;

/* The value of 'key' in a Python dict literal, or NULL. */
static const char *dict_value(const char *dict, const char *key) {
    char quoted[32];
    snprintf(quoted, sizeof quoted, "'%s'", key);
    const char *p = strstr(dict, quoted);
    if (!p) return NULL;
    p += strlen(quoted);
    while (*p == ' ') p++;
    if (*p != ':') return NULL;
    p++;
    while (*p == ' ') p++;
    return p;
}

static pk_status npy_parse(pk_context *ctx, const char *path, const char *name, const unsigned char *buf, size_t size,
                           npy_array *out) {
    memset(out, 0, sizeof *out);
    static const unsigned char magic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
    if (size < 10 || memcmp(buf, magic, 6) != 0)
        return pk_fail(ctx, PK_ERR_PARSE, "%s: array '%s' is not a .npy array (bad magic)", path, name);
    int major = buf[6];
    size_t header_len, offset;
    if (major == 1) {
        header_len = (size_t)buf[8] | (size_t)buf[9] << 8;
        offset = 10;
    } else if (major == 2 || major == 3) {
        if (size < 12) return pk_fail(ctx, PK_ERR_PARSE, "%s: array '%s': truncated header", path, name);
        header_len = (size_t)buf[8] | (size_t)buf[9] << 8 | (size_t)buf[10] << 16 | (size_t)buf[11] << 24;
        offset = 12;
    } else {
        return pk_fail(ctx, PK_ERR_PARSE, "%s: array '%s': unsupported .npy version %d", path, name, major);
    }
    if (header_len > size - offset) return pk_fail(ctx, PK_ERR_PARSE, "%s: array '%s': truncated header", path, name);
    char *dict = malloc(header_len + 1);
    if (!dict) return pk_fail(ctx, PK_ERR_NOMEM, "%s: out of memory", path);
    memcpy(dict, buf + offset, header_len);
    dict[header_len] = '\0';

    pk_status st = PK_OK;
    const char *descr = dict_value(dict, "descr");
    const char *fortran = dict_value(dict, "fortran_order");
    const char *shape = dict_value(dict, "shape");
    char type[16] = {0};
    if (!descr || !shape || !fortran) {
        st = pk_fail(ctx, PK_ERR_PARSE, "%s: array '%s': header lacks descr, fortran_order or shape", path, name);
        goto done;
    }
    if (*descr == '\'') {
        size_t k = 0;
        for (descr++; *descr && *descr != '\'' && k + 1 < sizeof type; descr++) type[k++] = *descr;
    }
    if (strcmp(type, "<f8") == 0) out->is_complex = 0, out->item_bytes = 8;
    else if (strcmp(type, "<f4") == 0) out->is_complex = 0, out->item_bytes = 4;
    else if (strcmp(type, "<c16") == 0) out->is_complex = 1, out->item_bytes = 16;
    else if (strcmp(type, "<c8") == 0) out->is_complex = 1, out->item_bytes = 8;
    else {
        st = pk_fail(ctx, PK_ERR_PARSE,
                     "%s: array '%s' has dtype '%s'; expected little-endian float64, float32, complex128 or complex64",
                     path, name, type);
        goto done;
    }
    if (*shape != '(') {
        st = pk_fail(ctx, PK_ERR_PARSE, "%s: array '%s': malformed shape", path, name);
        goto done;
    }
    size_t count = 1;
    int long_dims = 0; /* dimensions longer than 1 */
    const char *p = shape + 1;
    for (;;) {
        while (*p == ' ' || *p == ',') p++;
        if (*p == ')') break;
        if (!isdigit((unsigned char)*p)) {
            st = pk_fail(ctx, PK_ERR_PARSE, "%s: array '%s': malformed shape", path, name);
            goto done;
        }
        char *end;
        unsigned long long dim = strtoull(p, &end, 10);
        if (dim && count > SIZE_MAX / dim) {
            st = pk_fail(ctx, PK_ERR_PARSE, "%s: array '%s': shape too large", path, name);
            goto done;
        }
        count *= (size_t)dim;
        if (dim > 1) {
            size_t used = strlen(out->shape);
            snprintf(out->shape + used, sizeof out->shape - used, "%s%llu", long_dims ? ", " : "(", dim);
        }
        long_dims += dim > 1;
        p = end;
    }
    if (long_dims) {
        size_t used = strlen(out->shape);
        snprintf(out->shape + used, sizeof out->shape - used, ")");
    }
    /* the values are read in C order: a Fortran-ordered array of more than
     * one long dimension would pair them with the wrong u, v, w */
    if (long_dims > 1 && strncmp(fortran, "True", 4) == 0) {
        st = pk_fail(ctx, PK_ERR_PARSE,
                     "%s: array '%s' is stored in Fortran order with shape %.*s; save it in C order "
                     "(numpy.ascontiguousarray) or flat",
                     path, name, (int)(strchr(shape, ')') ? strchr(shape, ')') - shape + 1 : 1), shape);
        goto done;
    }
    size_t data_bytes = size - offset - header_len;
    if (count > data_bytes / (size_t)out->item_bytes) {
        st = pk_fail(ctx, PK_ERR_PARSE, "%s: array '%s' is truncated: shape says %zu values, the file holds %zu", path,
                     name, count, data_bytes / (size_t)out->item_bytes);
        goto done;
    }
    out->count = count;
    out->data = buf + offset + header_len;
done:
    free(dict);
    return st;
}

static double read_le(const unsigned char *p, int bytes) {
    if (bytes == 8) {
        uint64_t b = 0;
        for (int k = 7; k >= 0; k--) b = b << 8 | p[k];
        double d;
        memcpy(&d, &b, sizeof d);
        return d;
    }
    uint32_t b = 0;
    for (int k = 3; k >= 0; k--) b = b << 8 | p[k];
    float f;
    memcpy(&f, &b, sizeof f);
    return (double)f;
}

/* Read member "<name>.npy" whole; *buf is NULL when absent. */
static pk_status read_member(pk_context *ctx, const char *path, zip_t *za, const char *name, unsigned char **buf,
                             size_t *size) {
    char member[64];
    snprintf(member, sizeof member, "%s.npy", name);
    *buf = NULL;
    *size = 0;
    zip_stat_t sb;
    zip_stat_init(&sb);
    if (zip_stat(za, member, 0, &sb) != 0) return PK_OK;
    if (!(sb.valid & ZIP_STAT_SIZE)) return pk_fail(ctx, PK_ERR_PARSE, "%s: %s: unknown size", path, member);
    zip_file_t *zf = zip_fopen(za, member, 0);
    if (!zf) return pk_fail(ctx, PK_ERR_PARSE, "%s: %s: %s", path, member, zip_strerror(za));
    unsigned char *b = malloc(sb.size ? sb.size : 1);
    if (!b) {
        zip_fclose(zf);
        return pk_fail(ctx, PK_ERR_NOMEM, "%s: out of memory for %s", path, member);
    }
    zip_int64_t got = zip_fread(zf, b, sb.size);
    /* one read past the end: libzip checks the member's CRC when it meets
     * the end of the data, not when the last byte is read */
    unsigned char past;
    zip_int64_t more = got >= 0 && (zip_uint64_t)got == sb.size ? zip_fread(zf, &past, 1) : 0;
    if (got < 0 || (zip_uint64_t)got != sb.size || more != 0) {
        pk_status st = pk_fail(ctx, PK_ERR_PARSE, "%s: %s: %s (the .npz is cut short or damaged)", path, member,
                               more > 0 ? "longer than its stated size" : zip_file_strerror(zf));
        zip_fclose(zf);
        free(b);
        return st;
    }
    int closed = zip_fclose(zf);
    if (closed != 0) {
        zip_error_t ze;
        zip_error_init_with_code(&ze, closed);
        pk_status st =
            pk_fail(ctx, PK_ERR_PARSE, "%s: %s: %s (the .npz is damaged)", path, member, zip_error_strerror(&ze));
        zip_error_fini(&ze);
        free(b);
        return st;
    }
    *buf = b;
    *size = (size_t)sb.size;
    return PK_OK;
}

pk_status pk_vis_read_npz(pk_context *ctx, const char *path, pk_vis *out) {
    pk_clear(ctx);
    if (!out) return pk_fail(ctx, PK_ERR_INVALID, "pk_vis_read_npz: out is NULL");
    memset(out, 0, sizeof *out);
    if (!path) return pk_fail(ctx, PK_ERR_INVALID, "pk_vis_read_npz: path is NULL");
    pk_status sst = pk_need_seekable(ctx, path, "an .npz (a zip archive)");
    if (sst) return sst;
    int err = 0;
    zip_t *za = zip_open(path, ZIP_RDONLY | ZIP_CHECKCONS, &err);
    if (!za) {
        zip_error_t ze;
        zip_error_init_with_code(&ze, err);
        pk_status st = pk_fail(
            ctx, err == ZIP_ER_OPEN || err == ZIP_ER_NOENT ? PK_ERR_IO : PK_ERR_PARSE, "%s: cannot open as .npz: %s%s",
            path, zip_error_strerror(&ze),
            err == ZIP_ER_NOZIP || err == ZIP_ER_INCONS ? " (it starts as a zip archive: cut short or damaged?)" : "");
        zip_error_fini(&ze);
        return st;
    }
    const char *names[4] = {"u", "v", "w", "data"};
    unsigned char *buf[4] = {NULL, NULL, NULL, NULL};
    size_t size[4];
    npy_array arr[4];
    pk_status st = PK_OK;
    for (int a = 0; a < 4 && st == PK_OK; a++) {
        st = read_member(ctx, path, za, names[a], &buf[a], &size[a]);
        if (st == PK_OK && !buf[a])
            st =
                pk_fail(ctx, PK_ERR_PARSE, "%s: array '%s' is missing (a .npz needs u, v, w and data)", path, names[a]);
        if (st == PK_OK) st = npy_parse(ctx, path, names[a], buf[a], size[a], &arr[a]);
        if (st == PK_OK && a < 3 && arr[a].is_complex)
            st = pk_fail(ctx, PK_ERR_PARSE, "%s: array '%s' must be real, it is complex", path, names[a]);
    }
    zip_close(za);
    if (st == PK_OK) {
        for (int a = 1; a < 4 && st == PK_OK; a++)
            if (arr[a].count != arr[0].count)
                st = pk_fail(ctx, PK_ERR_PARSE, "%s: arrays differ in length: u has %zu values, %s has %zu", path,
                             arr[0].count, names[a], arr[a].count);
        /* arrays are read flat in C order (numpy's ravel); two of more than
         * one long dimension in different shapes (50 x 10 against 10 x 50)
         * would pair visibilities that do not belong together */
        for (int a = 0; a < 4 && st == PK_OK; a++)
            for (int b = a + 1; b < 4 && st == PK_OK; b++)
                if (strchr(arr[a].shape, ',') && strchr(arr[b].shape, ',') && strcmp(arr[a].shape, arr[b].shape) != 0)
                    st = pk_fail(ctx, PK_ERR_PARSE,
                                 "%s: arrays differ in shape: %s is %s, %s is %s; the values are paired one by one "
                                 "in C order, so arrays of more than one dimension need one shape",
                                 path, names[a], arr[a].shape, names[b], arr[b].shape);
    }
    if (st == PK_OK && arr[0].count == 0) st = pk_fail(ctx, PK_ERR_PARSE, "%s: the arrays are empty", path);
    if (st == PK_OK) st = pk_vis_alloc(ctx, arr[0].count, out);
    if (st == PK_OK) {
        size_t n = arr[0].count;
        double *dst[3] = {out->u, out->v, out->w};
        for (int a = 0; a < 3; a++)
            for (size_t k = 0; k < n; k++)
                dst[a][k] = read_le(arr[a].data + k * (size_t)arr[a].item_bytes, arr[a].item_bytes);
        int part = arr[3].is_complex ? arr[3].item_bytes / 2 : arr[3].item_bytes;
        for (size_t k = 0; k < n; k++) {
            const unsigned char *p = arr[3].data + k * (size_t)arr[3].item_bytes;
            out->re[k] = read_le(p, part);
            out->im[k] = arr[3].is_complex ? read_le(p + part, part) : 0.0;
        }
        for (size_t k = 0; k < n && st == PK_OK; k++) {
            if (!isfinite(out->u[k]) || !isfinite(out->v[k]) || !isfinite(out->w[k])) {
                const char *name = !isfinite(out->u[k]) ? "u" : !isfinite(out->v[k]) ? "v" : "w";
                double value = !isfinite(out->u[k]) ? out->u[k] : !isfinite(out->v[k]) ? out->v[k] : out->w[k];
                st = pk_fail(ctx, PK_ERR_PARSE, "%s: %s[%zu] is not finite (%g)", path, name, k, value);
            } else if (!isfinite(out->re[k]) || !isfinite(out->im[k]))
                st = pk_fail(ctx, PK_ERR_PARSE, "%s: data[%zu] is not finite (NaN or inf)", path, k);
        }
        out->sign = 1;
        out->n_records = n;
        out->weight_sum = (double)n;
        if (st) pk_vis_free(out);
    }
    for (int a = 0; a < 4; a++) free(buf[a]);
    return st;
}

/* ---- writing ------------------------------------------------------------------- */

/* A version 1.0 .npy of n values of descr, the header padded to 64 bytes. */
static unsigned char *npy_make(const char *descr, size_t n, size_t item_bytes, size_t *size) {
    char header[128];
    int len = snprintf(header, sizeof header, "{'descr': '%s', 'fortran_order': False, 'shape': (%zu,), }", descr, n);
    size_t total_header = 10 + (size_t)len + 1;
    size_t padded = (total_header + 63) / 64 * 64;
    size_t hl = padded - 10;
    unsigned char *buf = malloc(padded + n * item_bytes);
    if (!buf) return NULL;
    static const unsigned char magic[8] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0};
    memcpy(buf, magic, 8);
    buf[8] = (unsigned char)(hl & 0xff);
    buf[9] = (unsigned char)(hl >> 8);
    memcpy(buf + 10, header, (size_t)len);
    memset(buf + 10 + len, ' ', hl - (size_t)len - 1);
    buf[padded - 1] = '\n';
    *size = padded + n * item_bytes;
    return buf;
}

static void put_le64(unsigned char *p, double d) {
    uint64_t b;
    memcpy(&b, &d, sizeof b);
    for (int k = 0; k < 8; k++) p[k] = (unsigned char)(b >> (8 * k));
}

pk_status pk_vis_write_npz(pk_context *ctx, const char *path, const pk_vis *vis) {
    pk_clear(ctx);
    if (!path) return pk_fail(ctx, PK_ERR_INVALID, "pk_vis_write_npz: path is NULL");
    if (!vis) return pk_fail(ctx, PK_ERR_INVALID, "pk_vis_write_npz: vis is NULL");
    pk_status st_arrays = pk_vis_arrays_check(ctx, "pk_vis_write_npz", vis);
    if (st_arrays) return st_arrays;
    /* libzip writes to a temporary file beside path and renames it over
     * path in zip_close, so a failure leaves any old file untouched. What
     * it cannot say clearly is said first: a name that is a device or
     * read-only, a folder that is not there; a link is written through. */
    const char *unfit = pk_output_unfit(path);
    if (unfit) return pk_fail(ctx, PK_ERR_IO, "%s: cannot write: %s", path, unfit);
    char *target = pk_output_path(path);
    if (!target) return pk_fail(ctx, PK_ERR_NOMEM, "%s: out of memory", path);
    {
        char *slash = strrchr(target, '/');
        struct stat sb;
        int folder = 1;
        if (slash && slash != target) {
            *slash = '\0';
            folder = stat(target, &sb) == 0 && S_ISDIR(sb.st_mode);
            *slash = '/';
        }
        if (!folder) {
            free(target);
            return pk_fail(ctx, PK_ERR_IO, "%s: cannot write: its folder does not exist", path);
        }
    }
    int err = 0;
    zip_t *za = zip_open(target, ZIP_CREATE | ZIP_TRUNCATE, &err);
    free(target);
    if (!za) {
        zip_error_t ze;
        zip_error_init_with_code(&ze, err);
        pk_status st = pk_fail(ctx, PK_ERR_IO, "%s: cannot create: %s", path, zip_error_strerror(&ze));
        zip_error_fini(&ze);
        return st;
    }
    const char *names[4] = {"u.npy", "v.npy", "w.npy", "data.npy"};
    const double *src[3] = {vis->u, vis->v, vis->w};
    for (int a = 0; a < 4; a++) {
        size_t size;
        unsigned char *buf = a < 3 ? npy_make("<f8", vis->n, 8, &size) : npy_make("<c16", vis->n, 16, &size);
        if (!buf) {
            zip_discard(za);
            return pk_fail(ctx, PK_ERR_NOMEM, "%s: out of memory", path);
        }
        unsigned char *d = buf + size - vis->n * (a < 3 ? 8 : 16);
        for (size_t k = 0; k < vis->n; k++) {
            if (a < 3) {
                put_le64(d + 8 * k, src[a][k]);
            } else {
                put_le64(d + 16 * k, vis->re[k]);
                put_le64(d + 16 * k + 8, vis->im[k]);
            }
        }
        zip_source_t *zs = zip_source_buffer(za, buf, size, 1);
        if (!zs) {
            free(buf);
            pk_status st = pk_fail(ctx, PK_ERR_IO, "%s: %s", path, zip_strerror(za));
            zip_discard(za);
            return st;
        }
        if (zip_file_add(za, names[a], zs, ZIP_FL_OVERWRITE) < 0) {
            zip_source_free(zs);
            pk_status st = pk_fail(ctx, PK_ERR_IO, "%s: %s", path, zip_strerror(za));
            zip_discard(za);
            return st;
        }
    }
    if (zip_close(za) != 0) {
        pk_status st = pk_fail(ctx, PK_ERR_IO, "%s: write failed: %s", path, zip_strerror(za));
        zip_discard(za);
        return st;
    }
    return PK_OK;
}
