/* common.h - internal helpers shared by every workload: error reporting into
 * the caller's context, wall-clock timing, CPU feature detection, and files
 * written atomically (temporary file + rename) so that no reader ever sees a
 * half-written output.
 *
 * Invariant: nothing here prints or exits; failures travel back as a
 * pk_status with a message in ctx->message.
 */
#ifndef PAIRKIT_COMMON_H
#define PAIRKIT_COMMON_H

#include <stdio.h>

#include "pairkit/pairkit.h"

#if defined(__GNUC__)
#define PK_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define PK_PRINTF(a, b)
#endif

/* Record a formatted message in ctx (if any) and return status. */
pk_status pk_fail(pk_context *ctx, pk_status status, const char *fmt, ...) PK_PRINTF(3, 4);

/* Clear ctx->message at the start of a public call. */
void pk_clear(pk_context *ctx);

/* x in the fewest significant digits (15 to 17) that read back as x, for
 * messages: "3749.51", not "3749.5100000000002"; returns buf. */
const char *pk_format_exact(double x, char buf[32]);

/* The CPU threads a call runs: ctx->n_threads, OpenMP's default when 0,
 * at most PK_MAX_THREADS (OpenMP's runtime crashes when it cannot create
 * the threads asked for: 100000 did). */
int pk_thread_count(const pk_context *ctx);
/* The calling thread's number in its OpenMP team (0 outside one): thread 0
 * is the caller's, the one pk_progress_add lets report. */
int pk_thread_num(void);
/* How many threads the calling thread's team has (1 outside one). It can
 * be fewer than num_threads asked for: inside a caller's own parallel
 * region, under OMP_THREAD_LIMIT or OMP_DYNAMIC. */
int pk_team_size(void);

/* strtod in the "C" locale, whatever the process's (a program embedding
 * the library may have set a decimal comma). */
double pk_strtod(const char *s, char **end);
/* The calling thread writes numbers in the "C" locale from enter to the
 * matching leave (nested: the outermost pair counts). pk_atomic_open and
 * the release of the file (commit or abort) do this for every writer. */
void pk_numeric_c_enter(void);
void pk_numeric_c_leave(void);

/* Seconds on a monotonic clock. */
double pk_now(void);

/* The machine's physical memory in bytes; 0 where unknown. */
double pk_host_memory_bytes(void);

/* CPU features, detected once. */
int pk_cpu_has_avx2_fma(void);
int pk_cpu_has_avx512(void);
/* Why a kernel cannot run here, for messages: "this build has no CUDA
 * backend" or "no CUDA device is present" (cuda), else the instructions
 * the CPU lacks (needs_avx512: AVX-512, else AVX2 with FMA). */
const char *pk_kernel_absent_reason(int cuda, int needs_avx512);
/* dir without its trailing slashes ("trace/" -> "trace", "/" stays), in
 * buf; dir itself when it has none or the shorter name does not fit. File
 * names are made as dir/name. */
const char *pk_dir_name(const char *dir, char *buf, size_t size);
/* Makes the folder dir unless it exists (*created says which, when not
 * NULL). Errors name dir and, after a colon, what the folder is for (role):
 * a name that is not a folder, and a symbolic link to a folder that does
 * not exist (mkdir does not follow it). */
pk_status pk_dir_make(pk_context *ctx, const char *dir, const char *role, int *created);

/* Allocation with a cache-line alignment; free with pk_aligned_free. */
void *pk_aligned_alloc(size_t bytes);
void pk_aligned_free(void *p);

/* Atomic output: pk_atomic_open creates a temporary file beside `path`
 * (beside the file it points at, for a symbolic link: pk_output_path);
 * pk_atomic_commit flushes, fsyncs and renames it over that file;
 * pk_atomic_abort removes it. Exactly one of commit or abort must follow a
 * successful open. From the open to that release the thread prints numbers
 * in the "C" locale (pk_numeric_c_enter). A full disk or any write error makes commit fail, remove
 * the temporary file and leave an existing `path` untouched. */
typedef struct pk_atomic_file {
    FILE *fp;
    char *path;
    char *tmp_path;
} pk_atomic_file;

pk_status pk_atomic_open(pk_context *ctx, pk_atomic_file *f, const char *path);

/* The temporary files being written (pk_atomic_open's, the FITS image's):
 * noted by name while they exist (the string must live until forgotten),
 * so that a program ending by a signal can remove them first:
 * pk_temp_remove_all only unlinks, safe in a signal handler. Threads may
 * note and forget at once; past 64 files at a time, a name goes unnoted. */
void pk_temp_note(const char *path);
void pk_temp_forget(const char *path);
void pk_temp_remove_all(void);

/* Why a whole new file should not be renamed over `path`, or NULL: an
 * empty name, a device, pipe or socket (the rename would replace the node
 * itself), or an existing file without write permission (replacing it
 * would get round the permission). A directory is left to the rename,
 * which fails on it. A symbolic link to a file is written through
 * (pk_output_path); one to a folder, device, pipe or socket (/dev/stdout)
 * is refused; one to nothing gets the file made where it points. */
const char *pk_output_unfit(const char *path);

/* The file an output named `path` replaces: where path points when it is
 * a symbolic link to an existing file, or where its chain of links ends
 * when they lead to nothing (the link stays, as with a shell's `>`), else
 * path itself. malloc'ed; NULL when out of memory. */
char *pk_output_path(const char *path);

/* `path` with `suffix` appended to its last component, that component cut
 * short first where both would pass 255 bytes (NAME_MAX), so that a
 * temporary name beside an output of any valid name is valid too.
 * malloc'ed; NULL when out of memory. */
char *pk_sibling_name(const char *path, const char *suffix);
pk_status pk_atomic_commit(pk_context *ctx, pk_atomic_file *f);

/* Rename from[k] over to[k] for every k, all or none: the files already at
 * to[] are kept as hard links (or moved aside where there are none) until
 * every rename is done, and put back should one fail (a to[k] that did not
 * exist is removed again). Returns
 * -1 when all went through, else the index of the rename that failed, with
 * errno as it left. The from[] files are not removed on failure. Calls
 * run one after another: those of this process's threads, and those of
 * other processes into the folder of to[0] (flock, where it works). */
int pk_rename_all(int n, char *const *from, char *const *to);
/* Give `staged`, about to be renamed over `target`, target's permission
 * bits (and, run as root, its owner and group), so that an output written
 * again keeps the mode it was given; nothing when target is not a regular
 * file. pk_rename_all and pk_atomic_commit call it. */
void pk_keep_mode(const char *staged, const char *target);
void pk_atomic_abort(pk_atomic_file *f);

/* path opened for reading ("rb"); an error naming it when it cannot be
 * opened, or is a directory or a device (a pipe is read). */
pk_status pk_open_read(pk_context *ctx, const char *path, FILE **out);

/* PK_ERR_IO naming path when it is a pipe or a socket, which a reader
 * of `what` (a format read by seeking: "a FITS file", "an .npz") cannot
 * read; PK_OK for anything else, a missing file included (its opening
 * says so). */
pk_status pk_need_seekable(pk_context *ctx, const char *path, const char *what);

/* Read a whole file into memory with a terminating NUL (not counted in
 * *size). Errors name the file. */
pk_status pk_read_file(pk_context *ctx, const char *path, char **data, size_t *size);

/* For tests of the CUDA backends: when nonzero, a run that has sized its
 * device memory against what is free takes all but this many bytes of the
 * device's free memory before allocating (pk_cuda_test_take), as another
 * process allocating meanwhile would, and gives them back at its end.
 * Defined in platform.c, with or without CUDA. */
extern size_t pk_test_gpu_leave_free;

/* Progress reporting from inside OpenMP regions: only the thread that
 * created the tracker (the caller's) calls the callback; other threads add
 * work done. pk_progress_add returns non-zero once cancellation was asked. */
typedef struct pk_progress {
    pk_context *ctx;
    double total;      /* units of work in this stage */
    double base, span; /* fraction range of this stage within the call */
    double done;       /* updated atomically */
    double last_report;
    volatile int cancelled;
} pk_progress;

/* Start a stage: reports its starting fraction to the callback at once. */
void pk_progress_begin(pk_progress *p, pk_context *ctx, double total, double base, double span);
/* Add work from any thread; report (from the owning thread) at most ~20
 * times a second, and never again once the callback asked to stop.
 * Returns non-zero when cancelled. */
int pk_progress_add(pk_progress *p, double work, int is_owner_thread);
/* Report the fraction done to the callback now, from the owning thread,
 * whatever the time since the last report; non-zero when cancelled. */
int pk_progress_ask(pk_progress *p);

/* Flush `fp` and bring its data to the disk. On Linux it goes a step of
 * `step` bytes at a time (sync_file_range), each step added to `progress`
 * (when not NULL) as that many units of work and followed by
 * pk_progress_ask, so that a long sync shows its progress and stops when
 * asked; then one fsync (the metadata, the disk's cache). Elsewhere, or
 * where the file system refuses the steps, the fsync alone. Returns 0 once
 * the file is on the disk, 1 when cancelled (the file then half synced:
 * the caller removes it), -1 on a write error, errno saying which. */
int pk_sync_file(FILE *fp, uint64_t step, pk_progress *progress);
/* What to say of a write that failed earlier, its errno lost by stdio:
 * the disk, the device, or, under a file-size limit (ulimit -f), that. */
const char *pk_earlier_write_failure(void);
/* The same causes alone, for a message that already says the write failed. */
const char *pk_write_failure_causes(void);
/* The step for large outputs: a fraction of a second on a disk of a few
 * hundred MB/s, so a Ctrl-C during the sync takes effect about as soon. */
#define PK_SYNC_STEP_BYTES (32ull << 20)

#endif
