/* status.c - status names, the caller's context and its messages
 * (pk_fail), backend names and selection (whether CUDA was built and a
 * device is usable), and exact number formatting.
 *
 * The invariant: a failing call leaves its status's message in the
 * context, a succeeding one leaves it empty (pk_clear at entry). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

void pk_context_init(pk_context *ctx) {
    if (ctx) memset(ctx, 0, sizeof *ctx);
}

void pk_clear(pk_context *ctx) {
    if (ctx) ctx->message[0] = '\0';
}

pk_status pk_fail(pk_context *ctx, pk_status status, const char *fmt, ...) {
    if (ctx) {
        /* through a copy: an argument may be ctx->message itself (a
         * deeper call's message, wrapped) */
        char buf[sizeof ctx->message];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(buf, sizeof buf, fmt, ap);
        va_end(ap);
        memcpy(ctx->message, buf, sizeof buf);
    }
    return status;
}

const char *pk_status_str(pk_status status) {
    switch (status) {
    case PK_OK: return "ok";
    case PK_ERR_IO: return "I/O error";
    case PK_ERR_PARSE: return "parse error";
    case PK_ERR_INVALID: return "invalid argument";
    case PK_ERR_NOMEM: return "out of memory";
    case PK_ERR_CUDA: return "CUDA error";
    case PK_ERR_UNSUPPORTED: return "unsupported";
    case PK_ERR_CANCELLED: return "cancelled";
    case PK_ERR_INTERNAL: return "internal error";
    }
    return "unknown status";
}

const char *pk_backend_name(pk_backend backend) {
    switch (backend) {
    case PK_BACKEND_AUTO: return "auto";
    case PK_BACKEND_CPU: return "cpu";
    case PK_BACKEND_CUDA: return "cuda";
    }
    return "unknown";
}

pk_status pk_backend_parse(const char *name, pk_backend *out) {
    if (!name || !out) return PK_ERR_INVALID;
    if (strcmp(name, "auto") == 0) *out = PK_BACKEND_AUTO;
    else if (strcmp(name, "cpu") == 0) *out = PK_BACKEND_CPU;
    else if (strcmp(name, "cuda") == 0) *out = PK_BACKEND_CUDA;
    else return PK_ERR_INVALID;
    return PK_OK;
}

#ifndef PK_HAVE_CUDA
int pk_cuda_built(void) {
    return 0;
}
int pk_cuda_device_count(void) {
    return 0;
}
const char *pk_cuda_unusable(int device) {
    (void)device;
    return "this build has no CUDA backend";
}
int pk_cuda_describe(int device, char *buf, size_t size) {
    if (!buf) size = 0; /* nothing written, the answer still given */
    snprintf(buf, size, "cannot be used (%s)", pk_cuda_unusable(device));
    return 1;
}
#endif

pk_status pk_backend_resolve(pk_context *ctx, pk_backend wanted, pk_backend *resolved) {
    pk_clear(ctx);
    if (!resolved) return pk_fail(ctx, PK_ERR_INVALID, "pk_backend_resolve: resolved is NULL");
    if (wanted != PK_BACKEND_AUTO && wanted != PK_BACKEND_CPU && wanted != PK_BACKEND_CUDA)
        return pk_fail(ctx, PK_ERR_INVALID, "backend %d is not auto (0), cpu (1) or cuda (2)", (int)wanted);
    if (wanted == PK_BACKEND_CPU) {
        *resolved = PK_BACKEND_CPU;
        return PK_OK;
    }
    int devices = pk_cuda_device_count();
    if (wanted == PK_BACKEND_CUDA && devices == 0) {
        return pk_fail(ctx, PK_ERR_UNSUPPORTED, "the CUDA backend was asked for, but %s",
                       pk_cuda_built() ? "no CUDA device is present" : "this build has no CUDA backend");
    }
    /* a device that is there but takes no context (out of range, full, held
     * by another process in exclusive mode): auto leaves the work to the
     * CPU, an explicit CUDA fails saying why (a driver too old for this
     * build already shows as no device) */
    int device = ctx ? ctx->cuda_device : 0;
    const char *why = devices > 0 ? pk_cuda_unusable(device) : "no device";
    if (wanted == PK_BACKEND_CUDA && why)
        return pk_fail(ctx, PK_ERR_UNSUPPORTED,
                       "the CUDA backend was asked for, but CUDA device %d cannot be used (%s); --backend cpu runs "
                       "on the CPU",
                       device, why);
    *resolved = why ? PK_BACKEND_CPU : PK_BACKEND_CUDA;
    return PK_OK;
}

const char *pk_format_exact(double x, char buf[32]) {
    pk_numeric_c_enter();
    for (int digits = 15; digits <= 17; digits++) {
        snprintf(buf, 32, "%.*g", digits, x);
        if (pk_strtod(buf, NULL) == x) break;
    }
    pk_numeric_c_leave();
    return buf;
}
