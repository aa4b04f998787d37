/* platform.c - what pairkit needs from the machine: threads, clocks, CPU
 * features, memory, numbers read in the "C" locale, checked opening and
 * whole-file reads, and atomic file output (a temporary file beside the
 * name, written, fsync'ed and renamed over it; several renamed together by
 * pk_rename_all), with the registry of temporary files a fatal signal's
 * handler removes (pk_temp_note).
 *
 * The invariant: an output's final name only ever holds a whole file, the
 * old one or the new one; a temporary file is registered from its creation
 * until it is renamed or removed. */

#define _GNU_SOURCE /* sync_file_range */
#include <errno.h>
#include <stdint.h>
#include <fcntl.h>
#include <locale.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common.h"
#ifdef _OPENMP
#include <omp.h>
#endif

size_t pk_test_gpu_leave_free = 0;

int pk_thread_count(const pk_context *ctx) {
    int n = 1;
#ifdef _OPENMP
    n = ctx && ctx->n_threads > 0 ? ctx->n_threads : omp_get_max_threads();
#endif
    return n < 1 ? 1 : n > PK_MAX_THREADS ? PK_MAX_THREADS : n;
}

int pk_thread_num(void) {
#ifdef _OPENMP
    return omp_get_thread_num();
#else
    return 0;
#endif
}

/* ---- numbers in text, whatever the process's locale -------------------- */

static locale_t c_locale;
static pthread_once_t c_locale_once = PTHREAD_ONCE_INIT;
static void c_locale_make(void) {
    c_locale = newlocale(LC_ALL_MASK, "C", (locale_t)0);
}

double pk_strtod(const char *s, char **end) {
    pthread_once(&c_locale_once, c_locale_make);
    return c_locale ? strtod_l(s, end, c_locale) : strtod(s, end);
}

/* The calling thread's locale while it writes text output: the "C" one
 * from the first open to the last close of its atomic files. */
static _Thread_local int c_numeric_depth;
static _Thread_local locale_t c_numeric_saved;

void pk_numeric_c_enter(void) {
    pthread_once(&c_locale_once, c_locale_make);
    if (c_numeric_depth++ == 0) c_numeric_saved = c_locale ? uselocale(c_locale) : (locale_t)0;
}

void pk_numeric_c_leave(void) {
    if (c_numeric_depth > 0 && --c_numeric_depth == 0 && c_numeric_saved) uselocale(c_numeric_saved);
}

int pk_team_size(void) {
#ifdef _OPENMP
    return omp_get_num_threads();
#else
    return 1;
#endif
}

double pk_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

double pk_host_memory_bytes(void) {
#if defined(_SC_PHYS_PAGES) && defined(_SC_PAGESIZE)
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages > 0 && page > 0) return (double)pages * (double)page;
#endif
    return 0;
}

int pk_cpu_has_avx2_fma(void) {
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
    return 0;
#endif
}

int pk_cpu_has_avx512(void) {
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
#else
    return 0;
#endif
}

const char *pk_kernel_absent_reason(int cuda, int needs_avx512) {
    if (cuda) return pk_cuda_built() ? "no CUDA device is present" : "this build has no CUDA backend";
    return needs_avx512 ? "this CPU has no AVX-512 (F, BW, VL, DQ)" : "this CPU has no AVX2 with FMA";
}

void *pk_aligned_alloc(size_t bytes) {
    void *p = NULL;
    if (bytes == 0) bytes = 64;
    if (posix_memalign(&p, 64, bytes) != 0) return NULL;
    return p;
}

void pk_aligned_free(void *p) {
    free(p);
}

pk_status pk_open_read(pk_context *ctx, const char *path, FILE **out) {
    *out = NULL;
    if (!path || !*path) return pk_fail(ctx, PK_ERR_IO, "'': an empty file name");
    FILE *fp = fopen(path, "rb");
    if (!fp) return pk_fail(ctx, PK_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    int known = fstat(fileno(fp), &sb) == 0;
    if (known && S_ISDIR(sb.st_mode)) {
        fclose(fp);
        return pk_fail(ctx, PK_ERR_IO, "%s: is a directory, not a file", path);
    }
    /* a device would be read without end (/dev/zero) or block (a
     * terminal); a pipe is read to its end, as a shell's < would */
    if (known && (S_ISCHR(sb.st_mode) || S_ISBLK(sb.st_mode))) {
        fclose(fp);
        return pk_fail(ctx, PK_ERR_IO, "%s: is a device, not a file", path);
    }
    *out = fp;
    return PK_OK;
}

pk_status pk_need_seekable(pk_context *ctx, const char *path, const char *what) {
    struct stat sb;
    if (!path || stat(path, &sb) != 0 || (!S_ISFIFO(sb.st_mode) && !S_ISSOCK(sb.st_mode))) return PK_OK;
    return pk_fail(ctx, PK_ERR_IO,
                   "%s: is a pipe (as a shell's <(...) gives), and %s is read by seeking in it; give the file itself",
                   path, what);
}

pk_status pk_read_file(pk_context *ctx, const char *path, char **data, size_t *size) {
    *data = NULL;
    *size = 0;
    FILE *fp;
    pk_status st = pk_open_read(ctx, path, &fp);
    if (st) return st;
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap + 1);
    if (!buf) {
        fclose(fp);
        return pk_fail(ctx, PK_ERR_NOMEM, "%s: out of memory", path);
    }
    for (;;) {
        if (len == cap) {
            size_t ncap = cap * 2;
            char *nbuf = realloc(buf, ncap + 1);
            if (!nbuf) {
                free(buf);
                fclose(fp);
                return pk_fail(ctx, PK_ERR_NOMEM, "%s: out of memory reading %zu bytes", path, ncap);
            }
            buf = nbuf;
            cap = ncap;
        }
        size_t got = fread(buf + len, 1, cap - len, fp);
        len += got;
        if (got == 0) break;
    }
    int err = ferror(fp);
    fclose(fp);
    if (err) {
        free(buf);
        return pk_fail(ctx, PK_ERR_IO, "%s: read error", path);
    }
    buf[len] = '\0';
    *data = buf;
    *size = len;
    return PK_OK;
}

#define NAME_BYTES 255 /* NAME_MAX on Linux and the BSDs */

/* Where the symbolic link cur (lstat'ed into sb) points, a relative target
 * taken from the link's folder: a new string, NULL when out of memory or
 * when the link cannot be read (or has grown since the lstat). */
static char *next_link(const char *cur, const struct stat *sb) {
    size_t cap = (size_t)sb->st_size + 1 > 256 ? (size_t)sb->st_size + 1 : 256;
    char *target = malloc(cap);
    ssize_t got = target ? readlink(cur, target, cap - 1) : -1;
    if (got < 0 || (size_t)got >= cap - 1) {
        free(target);
        return NULL;
    }
    target[got] = '\0';
    const char *slash = strrchr(cur, '/');
    if (target[0] == '/' || !slash) return target;
    size_t dir = (size_t)(slash + 1 - cur);
    char *next = malloc(dir + (size_t)got + 1);
    if (next) {
        memcpy(next, cur, dir);
        memcpy(next + dir, target, (size_t)got + 1);
    }
    free(target);
    return next;
}

/* Whether a link of the chain from `path` lies in /proc: /dev/stdout,
 * /dev/fd/N and /proc/self/fd/N name an open descriptor, and what they
 * point at is another process's file (a shell's `>> log`): a rename over
 * it would take it from under that process. */
static int links_to_descriptor(const char *path) {
    char *cur = strdup(path);
    int found = 0;
    for (int hop = 0; cur && hop < 40 && !found; hop++) {
        struct stat sb;
        if (lstat(cur, &sb) != 0 || !S_ISLNK(sb.st_mode)) break;
        char *slash = strrchr(cur, '/');
        char *dir = slash ? strndup(cur, slash == cur ? 1 : (size_t)(slash - cur)) : strdup(".");
        char *real = dir ? realpath(dir, NULL) : NULL;
        found = real && (strncmp(real, "/proc/", 6) == 0 || strcmp(real, "/proc") == 0);
        free(real);
        free(dir);
        char *next = next_link(cur, &sb);
        free(cur);
        cur = next;
    }
    free(cur);
    return found;
}

const char *pk_output_unfit(const char *path) {
    struct stat sb;
    if (!path || !*path) return "is an empty file name";
    const char *last = strrchr(path, '/');
    if (strlen(last ? last + 1 : path) > NAME_BYTES)
        return "is a name longer than the 255 bytes a file's name may have";
    if (lstat(path, &sb) != 0) return NULL;
    if (S_ISLNK(sb.st_mode) && links_to_descriptor(path))
        return "names an open file descriptor (as /dev/stdout and /dev/fd/N do): outputs are written whole, to a "
               "temporary file renamed over the name, which would take the file from under whoever holds it, so "
               "give the name of a file";
    if (S_ISLNK(sb.st_mode)) {
        struct stat tb;
        if (stat(path, &tb) != 0) {
            if (errno == ELOOP) return "is a loop of symbolic links";
            /* a link to nothing: the file is made where it points
             * (pk_output_path), in a folder that must exist */
            char *end = pk_output_path(path);
            if (!end) return NULL; /* out of memory: said when the file is opened */
            char *slash = strrchr(end, '/');
            if (slash) slash[1] = '\0';
            int folder = stat(slash ? end : ".", &tb) == 0 && S_ISDIR(tb.st_mode);
            free(end);
            if (!folder) return "is a link to a name in a folder that does not exist";
            return NULL;
        }
        if (S_ISDIR(tb.st_mode)) return "is a link to a folder; give the name of a file";
        if (!S_ISREG(tb.st_mode))
            return "is a link to something that is not a regular file (a device, pipe or socket, as /dev/stdout "
                   "may be): outputs are written whole, to a temporary file renamed over the name, so give the "
                   "name of a file";
        if (access(path, W_OK) != 0) return "is a link to a read-only file (no permission to write it)";
        return NULL; /* written through (pk_output_path) */
    }
    if (S_ISDIR(sb.st_mode)) return NULL; /* the rename fails, saying so */
    if (!S_ISREG(sb.st_mode))
        return "is not a regular file (a device, pipe or socket): outputs are written whole, to a temporary file "
               "renamed over the name, so give the name of a file";
    if (access(path, W_OK) != 0) return "is read-only (no permission to write it)";
    return NULL;
}

/* Where a chain of symbolic links from `path` ends (a name that does not
 * exist), each relative target taken from its link's folder; NULL when
 * out of memory, after 40 links (a loop), or when a link cannot be read. */
static char *link_chain_end(const char *path) {
    char *cur = strdup(path);
    for (int hop = 0; cur && hop < 40; hop++) {
        struct stat sb;
        if (lstat(cur, &sb) != 0 || !S_ISLNK(sb.st_mode)) return cur;
        char *next = next_link(cur, &sb);
        free(cur);
        cur = next;
    }
    free(cur);
    return NULL;
}

char *pk_output_path(const char *path) {
    struct stat sb, tb;
    if (lstat(path, &sb) == 0 && S_ISLNK(sb.st_mode)) {
        if (stat(path, &tb) == 0) {
            if (S_ISREG(tb.st_mode)) {
                char *target = realpath(path, NULL);
                if (target) return target;
            }
        } else {
            /* a link to nothing: the file is made where it points, as a
             * shell's > makes it */
            char *end = link_chain_end(path);
            if (end) return end;
        }
    }
    return strdup(path);
}

char *pk_sibling_name(const char *path, const char *suffix) {
    const char *slash = strrchr(path, '/');
    size_t dir = slash ? (size_t)(slash + 1 - path) : 0, base = strlen(path) - dir, tail = strlen(suffix);
    if (base + tail > NAME_BYTES) base = tail < NAME_BYTES ? NAME_BYTES - tail : 0;
    char *out = malloc(dir + base + tail + 1);
    if (!out) return NULL;
    memcpy(out, path, dir + base);
    memcpy(out + dir + base, suffix, tail + 1);
    return out;
}

/* The temporary files being written now (their names), for
 * pk_temp_remove_all; a name beyond the slots goes unnoted. */
#define TEMP_SLOTS 64
static _Atomic(const char *) temp_slots[TEMP_SLOTS];

void pk_temp_note(const char *path) {
    for (int k = 0; path && k < TEMP_SLOTS; k++) {
        const char *empty = NULL;
        if (atomic_compare_exchange_strong(&temp_slots[k], &empty, path)) return;
    }
}

void pk_temp_forget(const char *path) {
    for (int k = 0; path && k < TEMP_SLOTS; k++) {
        const char *was = path;
        if (atomic_compare_exchange_strong(&temp_slots[k], &was, NULL)) return;
    }
}

void pk_temp_remove_all(void) {
    for (int k = 0; k < TEMP_SLOTS; k++) {
        const char *p = atomic_load(&temp_slots[k]);
        if (p) unlink(p);
    }
}

pk_status pk_atomic_open(pk_context *ctx, pk_atomic_file *f, const char *path) {
    memset(f, 0, sizeof *f);
    const char *unfit = pk_output_unfit(path);
    if (unfit) return pk_fail(ctx, PK_ERR_IO, "%s: cannot write: %s", path && *path ? path : "''", unfit);
    f->path = pk_output_path(path);
    f->tmp_path = f->path ? pk_sibling_name(f->path, ".tmp.000000") : NULL;
    if (!f->path || !f->tmp_path) {
        free(f->path);
        free(f->tmp_path);
        return pk_fail(ctx, PK_ERR_NOMEM, "%s: out of memory", path);
    }
    /* a new name beside the file, created with open's mode 0666 so that the
     * umask applies as to any new file, without reading the umask (which
     * umask() can only do by changing it, for every thread) */
    int fd = -1;
    pk_temp_note(f->tmp_path); /* before it exists: a signal between cannot leave it behind */
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t seed = (uint64_t)ts.tv_nsec ^ ((uint64_t)getpid() << 32) ^ (uint64_t)(uintptr_t)f;
    for (int attempt = 0; attempt < 100 && fd < 0; attempt++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        size_t at = strlen(f->tmp_path) - 6; /* the six hex digits at the end */
        snprintf(f->tmp_path + at, 7, "%06llx", (unsigned long long)(seed >> 40) & 0xffffffull);
        fd = open(f->tmp_path, O_WRONLY | O_CREAT | O_EXCL, 0666);
        if (fd < 0 && errno != EEXIST) break;
    }
    if (fd < 0) {
        pk_status st = pk_fail(ctx, PK_ERR_IO, "%s: cannot create: %s", path, strerror(errno));
        pk_temp_forget(f->tmp_path);
        free(f->path);
        free(f->tmp_path);
        memset(f, 0, sizeof *f);
        return st;
    }
    f->fp = fdopen(fd, "wb");
    if (!f->fp) {
        close(fd);
        unlink(f->tmp_path);
        pk_temp_forget(f->tmp_path);
        free(f->path);
        free(f->tmp_path);
        memset(f, 0, sizeof *f);
        return pk_fail(ctx, PK_ERR_IO, "%s: cannot create", path);
    }
    pk_numeric_c_enter();
    return PK_OK;
}

static void atomic_release(pk_atomic_file *f) {
    if (f->path) pk_numeric_c_leave(); /* an open file's, once */
    pk_temp_forget(f->tmp_path);
    free(f->path);
    free(f->tmp_path);
    memset(f, 0, sizeof *f);
}

/* One group of renames at a time into a folder: two threads or processes
 * committing to the same paths then end with one writer's files, not a
 * mix of both, and threads never share a kept copy's name (it is the
 * path, the process id and k). Threads of this process wait on a mutex;
 * other processes on flock() of the folder of to[0], where the file
 * system has it (else they are not held back). */
static pthread_mutex_t rename_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t rename_fork_once = PTHREAD_ONCE_INIT;

/* A fork() while another thread holds the mutex would give the child a
 * mutex nobody can unlock: the child's first group of renames would wait
 * for ever. fork() therefore takes the mutex first (so no group is half
 * done in the copy) and both sides let it go. */
static void rename_fork_prepare(void) {
    pthread_mutex_lock(&rename_lock);
}
static void rename_fork_after(void) {
    pthread_mutex_unlock(&rename_lock);
}
static void rename_fork_register(void) {
    pthread_atfork(rename_fork_prepare, rename_fork_after, rename_fork_after);
}

static int rename_all_locked(int n, char *const *from, char *const *to);

static int lock_folder_of(const char *path) {
    const char *slash = strrchr(path, '/');
    char *dir = slash ? strndup(path, slash == path ? 1 : (size_t)(slash - path)) : strdup(".");
    int fd = dir ? open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
    free(dir);
    if (fd < 0) return -1;
    int r;
    while ((r = flock(fd, LOCK_EX)) != 0 && errno == EINTR) {
    }
    if (r != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

int pk_rename_all(int n, char *const *from, char *const *to) {
    pthread_once(&rename_fork_once, rename_fork_register);
    pthread_mutex_lock(&rename_lock);
    int folder = n > 0 ? lock_folder_of(to[0]) : -1;
    int failed = rename_all_locked(n, from, to);
    int saved = errno;
    if (folder >= 0) close(folder); /* the lock goes with the descriptor */
    pthread_mutex_unlock(&rename_lock);
    errno = saved;
    return failed;
}

void pk_keep_mode(const char *staged, const char *target) {
    struct stat sb;
    if (stat(target, &sb) != 0 || !S_ISREG(sb.st_mode)) return;
    /* root may give it back its owner too; anyone else keeps the file as
     * theirs (a failure leaves the new file as it was made) */
    if (geteuid() == 0 && chown(staged, sb.st_uid, sb.st_gid) != 0) {
        /* not kept: the file stays root's */
    }
    if (chmod(staged, sb.st_mode & 07777) != 0) {
        /* not kept: the umask's mode stays */
    }
}

static int rename_all_locked(int n, char *const *from, char *const *to) {
    char **keep = calloc((size_t)n + 1, sizeof *keep);
    char *moved = calloc((size_t)n + 1, 1); /* keep[k] was moved aside, not linked */
    int failed = -1, saved = 0;
    if (!moved) {
        free(keep);
        keep = NULL;
    }
    /* the old files' modes, before any of them is moved aside */
    for (int k = 0; k < n; k++) pk_keep_mode(from[k], to[k]);
    for (int k = 0; keep && k < n; k++) {
        struct stat sb;
        if (lstat(to[k], &sb) != 0 || !S_ISREG(sb.st_mode)) continue;
        char suffix[64];
        snprintf(suffix, sizeof suffix, ".pkkeep%ld-%d", (long)getpid(), k);
        keep[k] = pk_sibling_name(to[k], suffix);
        if (!keep[k]) continue;
        /* a hard link where the file system has them; else the older file
         * moved aside (absent for a moment, but it can come back) */
        if (link(to[k], keep[k]) == 0) continue;
        if (rename(to[k], keep[k]) == 0) {
            moved[k] = 1;
            continue;
        }
        free(keep[k]);
        keep[k] = NULL;
    }
    for (int k = 0; k < n && failed < 0; k++)
        if (rename(from[k], to[k]) != 0) failed = k, saved = errno;
    for (int k = 0; failed >= 0 && k < n; k++) {
        if (k < failed && !(keep && keep[k])) unlink(to[k]); /* new where there was nothing */
        else if (keep && keep[k] && (k < failed || moved[k])) rename(keep[k], to[k]);
    }
    for (int k = 0; keep && k < n; k++) {
        if (keep[k]) unlink(keep[k]); /* already gone where it was put back */
        free(keep[k]);
    }
    free(keep);
    free(moved);
    errno = saved;
    return failed;
}

pk_status pk_atomic_commit(pk_context *ctx, pk_atomic_file *f) {
    int failed = ferror(f->fp) != 0;
    int saved_errno = 0;
    if (fflush(f->fp) != 0) {
        failed = 1;
        saved_errno = errno;
    }
    if (!failed && fsync(fileno(f->fp)) != 0) {
        failed = 1;
        saved_errno = errno;
    }
    if (fclose(f->fp) != 0 && !failed) {
        failed = 1;
        saved_errno = errno;
    }
    f->fp = NULL;
    if (!failed) pk_keep_mode(f->tmp_path, f->path);
    if (!failed && rename(f->tmp_path, f->path) != 0) {
        failed = 1;
        saved_errno = errno;
    }
    if (failed) {
        unlink(f->tmp_path);
        pk_status st = pk_fail(ctx, PK_ERR_IO, "%s: write failed: %s", f->path,
                               saved_errno ? strerror(saved_errno) : pk_earlier_write_failure());
        atomic_release(f);
        return st;
    }
    atomic_release(f);
    return PK_OK;
}

void pk_atomic_abort(pk_atomic_file *f) {
    if (f->fp) fclose(f->fp);
    if (f->tmp_path) unlink(f->tmp_path);
    atomic_release(f);
}

const char *pk_dir_name(const char *dir, char *buf, size_t size) {
    size_t n = strlen(dir);
    while (n > 1 && dir[n - 1] == '/') n--;
    if (n == strlen(dir) || n >= size) return dir;
    memcpy(buf, dir, n);
    buf[n] = '\0';
    return buf;
}

pk_status pk_dir_make(pk_context *ctx, const char *dir, const char *role, int *created) {
    if (created) *created = 0;
    if (mkdir(dir, 0777) == 0) {
        if (created) *created = 1;
        return PK_OK;
    }
    if (errno != EEXIST) return pk_fail(ctx, PK_ERR_IO, "%s: cannot create the directory: %s", dir, strerror(errno));
    struct stat sb;
    if (stat(dir, &sb) == 0) {
        if (!S_ISDIR(sb.st_mode)) return pk_fail(ctx, PK_ERR_IO, "%s: not a directory (%s)", dir, role);
        return PK_OK;
    }
    char target[4096];
    ssize_t len = readlink(dir, target, sizeof target - 1);
    if (len < 0) return pk_fail(ctx, PK_ERR_IO, "%s: %s", dir, strerror(errno));
    target[len] = '\0';
    return pk_fail(ctx, PK_ERR_IO,
                   "%s: a symbolic link to '%s', which does not exist (%s): make that folder, or give another name",
                   dir, target, role);
}

static int file_size_limited(void) {
    struct rlimit rl;
    return getrlimit(RLIMIT_FSIZE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY;
}

#define CAUSES_DISK "disk full or I/O error"
#define CAUSES_LIMITED "disk full, I/O error, or the file-size limit of ulimit -f"

const char *pk_write_failure_causes(void) {
    return file_size_limited() ? CAUSES_LIMITED : CAUSES_DISK;
}

const char *pk_earlier_write_failure(void) {
    return file_size_limited() ? "an earlier write failed (" CAUSES_LIMITED ")"
                               : "an earlier write failed (" CAUSES_DISK ")";
}

int pk_sync_file(FILE *fp, uint64_t step, pk_progress *progress) {
    if (ferror(fp)) {
        errno = 0;
        return -1;
    }
    if (fflush(fp) != 0) return -1;
    int fd = fileno(fp);
#if defined(__linux__) && defined(SYNC_FILE_RANGE_WRITE)
    struct stat sb;
    if (step > 0 && fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode)) {
        const unsigned flags = SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE | SYNC_FILE_RANGE_WAIT_AFTER;
        for (uint64_t at = 0; at < (uint64_t)sb.st_size; at += step) {
            uint64_t len = (uint64_t)sb.st_size - at < step ? (uint64_t)sb.st_size - at : step;
            if (sync_file_range(fd, (off_t)at, (off_t)len, flags) != 0) {
                if (errno == EINVAL || errno == ENOSYS || errno == ESPIPE || errno == EOPNOTSUPP) break;
                return -1; /* EIO, ENOSPC: the data did not reach the disk */
            }
            if (progress) {
                pk_progress_add(progress, (double)len, 0);
                if (pk_progress_ask(progress)) return 1;
            }
        }
    }
#else
    (void)step;
    (void)progress;
#endif
    return fsync(fd) != 0 ? -1 : 0;
}
