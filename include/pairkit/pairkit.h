/* pairkit.h - the common part of the pairkit C API: status codes, the
 * caller's context (error message, progress callback, cancellation), and
 * backend selection.
 *
 * A public function that takes a context returns a pk_status; on failure it
 * writes a message naming the file, line, argument or field into
 * ctx->message (ctx may be NULL: the status alone then tells). A required
 * pointer argument that is NULL, or an enum field outside its enum, is
 * PK_ERR_INVALID with a message naming it ("pk_memsort_run: trace is
 * NULL").
 * The parse functions (pk_backend_parse, pk_estimator_parse,
 * pk_units_parse, pk_weights_parse, pk_weighting_parse,
 * pk_catalog_format_parse) take no context and write no message: they
 * return PK_OK or PK_ERR_INVALID only, PK_ERR_INVALID for an unknown name
 * and for a NULL name or out, leaving *out unchanged then.
 * Functions that return another type say what they return for NULL
 * arguments. Every pk_*_free function takes NULL and an already freed
 * (emptied) object without harm. The library itself never
 * prints, never exits and never installs signal handlers. A context may be
 * used by one thread at a time; distinct contexts are independent, also
 * when calls come from inside the caller's own OpenMP parallel region (the
 * call then gets the threads OpenMP gives it, often one). Numbers in text
 * files are read and written in the "C" locale, whatever locale the
 * program has set. cfitsio's message stack, which the whole process
 * shares, keeps the caller's messages: a FITS read or write clears back
 * to a mark of its own and takes its message from the status alone.
 */
#ifndef PAIRKIT_PAIRKIT_H
#define PAIRKIT_PAIRKIT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif
#if defined(__GNUC__)
#pragma GCC visibility push(default) /* the public API: what libpairkit.so exports */
#endif

#define PK_VERSION_STRING "0.1.0"

typedef enum pk_status {
    PK_OK = 0,
    PK_ERR_IO,          /* a file could not be opened, read or written */
    PK_ERR_PARSE,       /* malformed input; the message names file and line */
    PK_ERR_INVALID,     /* an argument or option is out of range */
    PK_ERR_NOMEM,       /* a host allocation failed */
    PK_ERR_CUDA,        /* a CUDA call failed; the message names it */
    PK_ERR_UNSUPPORTED, /* asked for a backend or feature not built or not present */
    PK_ERR_CANCELLED,   /* the progress callback asked to stop */
    PK_ERR_INTERNAL     /* a self-check failed: a bug, please report it */
} pk_status;

typedef enum pk_backend {
    PK_BACKEND_AUTO = 0, /* CUDA when built in and a device is present, else CPU */
    PK_BACKEND_CPU,
    PK_BACKEND_CUDA
} pk_backend;

/* Called from the calling thread with the fraction of work done (0..1).
 * Return non-zero to cancel: the running function then returns
 * PK_ERR_CANCELLED promptly (within a fraction of a second) and writes no
 * result. */
typedef int (*pk_progress_fn)(void *user, double fraction_done);

#define PK_MESSAGE_MAX 512
#define PK_MAX_THREADS 1024 /* the most CPU threads a call starts */

typedef struct pk_context {
    char message[PK_MESSAGE_MAX]; /* set on failure; empty on success */
    pk_progress_fn progress;      /* optional */
    void *progress_user;
    int n_threads;   /* CPU threads; 0 (or less) = OpenMP's default; more than PK_MAX_THREADS count as that many */
    int cuda_device; /* CUDA device ordinal for PK_BACKEND_CUDA */
} pk_context;

/* A context with defaults: no progress callback, all threads, device 0.
 * ctx NULL: nothing done. */
void pk_context_init(pk_context *ctx);

/* A short constant English name for a status ("parse error"). */
const char *pk_status_str(pk_status status);

/* Name of a backend ("auto", "cpu", "cuda"; "unknown" for any other
 * value), and the reverse (PK_ERR_INVALID for an unknown or NULL name, or
 * a NULL out; no message). */
const char *pk_backend_name(pk_backend backend);
pk_status pk_backend_parse(const char *name, pk_backend *out);

/* 1 when the library was built with CUDA, 0 otherwise. */
int pk_cuda_built(void);

/* Number of CUDA devices the driver reports: 0 when not built with CUDA,
 * when there is no driver or no device. Never fails. */
int pk_cuda_device_count(void);

/* NULL when a CUDA context can be made on device `device`; otherwise why
 * not, as a constant string ("invalid device ordinal", "CUDA-capable device
 * is busy or unavailable", "this build has no CUDA backend", ...). Asked
 * once a device, the answer kept. Leaves the calling thread's current
 * device as it was. */
const char *pk_cuda_unusable(int device);

/* One line about CUDA device `device` into buf[size] (buf NULL or size 0:
 * nothing written, the return value still given): its name, compute
 * capability, memory and memory free now ("NVIDIA H200, sm_90, 139.8 GiB,
 * 139.1 GiB free"), or "cannot be used (why)" (pk_cuda_unusable). Returns 0
 * when the device can be used, 1 otherwise. Leaves the calling thread's
 * current device as it was. */
int pk_cuda_describe(int device, char *buf, size_t size);

/* Resolve PK_BACKEND_AUTO to CPU or CUDA: CUDA when ctx->cuda_device (0
 * without a context) can be used (pk_cuda_unusable), the CPU otherwise. An
 * explicit PK_BACKEND_CUDA with no device, or with one that cannot be used,
 * gives PK_ERR_UNSUPPORTED with a message saying why; a value outside the
 * enum, PK_ERR_INVALID. resolved is required. */
pk_status pk_backend_resolve(pk_context *ctx, pk_backend wanted, pk_backend *resolved);

#if defined(__GNUC__)
#pragma GCC visibility pop
#endif

#ifdef __cplusplus
}
#endif

#endif
