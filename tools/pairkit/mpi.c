/* mpi.c - the CLI's use of MPI: start-up only under an MPI launcher,
 * collective status checks so that one failing rank fails the whole job,
 * and the exact integer reductions of the pair counts. */
#include <stdlib.h>
#include <string.h>
#ifdef __linux__
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>
#endif

#include "mpi.h"
#include "common/common.h"
#include "pairkit/pairkit.h"

#ifdef PK_HAVE_MPI
#include <mpi.h>

int cli_mpi_built(void) {
    return 1;
}

static int active = 0, rank = 0, size = 1;
static int node_rank = 0;       /* rank among the ranks sharing this node */
static double comm_seconds = 0; /* time inside the collectives below */

double cli_mpi_comm_seconds(void) {
    return comm_seconds;
}

static int launched_by_mpi(void) {
    return getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMI_SIZE") || getenv("PMIX_RANK") || getenv("PMI_RANK");
}

void cli_mpi_init(int *argc, char ***argv) {
    if (!launched_by_mpi()) return;
#ifdef __linux__
    /* A launcher that ends (mpirun given a second Ctrl-C, or killed)
     * leaves its ranks running on their own, to write their outputs after
     * the job has been reported failed: each rank takes SIGTERM when its
     * parent goes, which stops it as a Ctrl-C would, writing nothing. */
    pid_t parent = getppid();
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent) raise(SIGTERM); /* gone already */
#endif
    MPI_Init(argc, argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    /* the ranks of one node, for the choice of its GPUs: with ranks placed
     * round-robin over nodes, the global rank would put two on one GPU */
    MPI_Comm node;
    if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node) == MPI_SUCCESS) {
        MPI_Comm_rank(node, &node_rank);
        MPI_Comm_free(&node);
    } else {
        node_rank = rank;
    }
    active = 1;
}

int cli_mpi_cuda_device(void) {
    int devices = pk_cuda_device_count();
    return active && size > 1 && devices > 0 ? node_rank % devices : 0;
}

void cli_mpi_finalize(void) {
    if (active) MPI_Finalize();
    active = 0;
}

int cli_mpi_rank(void) {
    return rank;
}
int cli_mpi_size(void) {
    return size;
}

int cli_mpi_all_ok(int ok) {
    if (!active) return ok != 0;
    int mine = ok != 0, all = 0;
    double t0 = MPI_Wtime();
    MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    comm_seconds += MPI_Wtime() - t0;
    return all;
}

int cli_mpi_sum_u64(uint64_t *values, size_t n) {
    if (!active) return 0;
    /* in pieces of at most 2^30 values: MPI counts are int */
    double t0 = MPI_Wtime();
    for (size_t off = 0; off < n; off += (size_t)1 << 30) {
        int count = (int)(n - off < ((size_t)1 << 30) ? n - off : ((size_t)1 << 30));
        int rc = MPI_Reduce(rank == 0 ? MPI_IN_PLACE : values + off, rank == 0 ? values + off : NULL, count,
                            MPI_UINT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
        if (rc != MPI_SUCCESS) return 1;
    }
    comm_seconds += MPI_Wtime() - t0;
    return 0;
}

int cli_mpi_sum_double(double *values, size_t n) {
    if (!active) return 0;
    /* in pieces of at most 2^30 values: MPI counts are int */
    double t0 = MPI_Wtime();
    for (size_t off = 0; off < n; off += (size_t)1 << 30) {
        int count = (int)(n - off < ((size_t)1 << 30) ? n - off : ((size_t)1 << 30));
        int rc = MPI_Reduce(rank == 0 ? MPI_IN_PLACE : values + off, rank == 0 ? values + off : NULL, count, MPI_DOUBLE,
                            MPI_SUM, 0, MPI_COMM_WORLD);
        if (rc != MPI_SUCCESS) return 1;
    }
    comm_seconds += MPI_Wtime() - t0;
    return 0;
}

int cli_mpi_gather_bytes(const void *mine, size_t count, void *all) {
    if (!active) return 0;
    double t0 = MPI_Wtime();
    int rc = MPI_Gather(mine, (int)count, MPI_BYTE, all, (int)count, MPI_BYTE, 0, MPI_COMM_WORLD);
    comm_seconds += MPI_Wtime() - t0;
    return rc == MPI_SUCCESS ? 0 : 1;
}

int cli_mpi_same_u64(uint64_t v) {
    if (!active) return 1;
    uint64_t lo = v, hi = v;
    double t0 = MPI_Wtime();
    MPI_Allreduce(&v, &lo, 1, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(&v, &hi, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
    comm_seconds += MPI_Wtime() - t0;
    return lo == hi;
}

double cli_mpi_max(double v) {
    if (!active) return v;
    double out = v, t0 = MPI_Wtime();
    MPI_Allreduce(&v, &out, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    comm_seconds += MPI_Wtime() - t0;
    return out;
}

void cli_mpi_barrier(void) {
    if (active) MPI_Barrier(MPI_COMM_WORLD);
}

#else
int cli_mpi_built(void) {
    return 0;
}

void cli_mpi_init(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
}
int cli_mpi_cuda_device(void) {
    return 0;
}
void cli_mpi_finalize(void) {}
double cli_mpi_comm_seconds(void) {
    return 0;
}
int cli_mpi_rank(void) {
    return 0;
}
int cli_mpi_size(void) {
    return 1;
}
int cli_mpi_all_ok(int ok) {
    return ok != 0;
}
int cli_mpi_sum_u64(uint64_t *values, size_t n) {
    (void)values;
    (void)n;
    return 0;
}
int cli_mpi_sum_double(double *values, size_t n) {
    (void)values;
    (void)n;
    return 0;
}
int cli_mpi_gather_bytes(const void *mine, size_t count, void *all) {
    (void)mine;
    (void)count;
    (void)all;
    return 0;
}
double cli_mpi_max(double v) {
    return v;
}
int cli_mpi_same_u64(uint64_t v) {
    (void)v;
    return 1;
}
void cli_mpi_barrier(void) {}

#endif

static int error_shared = 0; /* the last error is every rank's alike */

int cli_mpi_error_shared(void) {
    return error_shared;
}

pk_status cli_mpi_same_input(pk_context *ctx, uint64_t h, const char *path, const char *what) {
    if (cli_mpi_same_u64(h)) return PK_OK;
    error_shared = 1; /* every rank fails with this message: rank 0 says it */
    return pk_fail(ctx, PK_ERR_PARSE,
                   "%s: the ranks read different %s under this name (another copy on some node?); every rank must "
                   "read the same input",
                   path, what);
}

static uint64_t word_at(const unsigned char *b) {
    uint64_t w;
    memcpy(&w, b, 8);
    return w;
}

/* Four lanes of 8-byte words side by side: one lane's multiply chain would
 * hold the pass to 7 GB/s, four keep it at the speed of memory. */
uint64_t cli_hash_bytes(uint64_t h, const void *p, size_t n) {
    const uint64_t prime = 0x100000001b3ull;
    const unsigned char *b = p;
    uint64_t h0 = h, h1 = h ^ 1, h2 = h ^ 2, h3 = h ^ 3;
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        h0 = (h0 ^ word_at(b + i)) * prime;
        h1 = (h1 ^ word_at(b + i + 8)) * prime;
        h2 = (h2 ^ word_at(b + i + 16)) * prime;
        h3 = (h3 ^ word_at(b + i + 24)) * prime;
    }
    h = ((((((uint64_t)n ^ h0) * prime) ^ h1) * prime ^ h2) * prime ^ h3) * prime;
    for (; i + 8 <= n; i += 8) h = (h ^ word_at(b + i)) * prime;
    if (i < n) {
        uint64_t w = 0;
        memcpy(&w, b + i, n - i);
        h = (h ^ w) * prime;
    }
    return h;
}
