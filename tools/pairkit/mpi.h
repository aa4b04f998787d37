/* mpi.h - ranks for `mpirun -np K pairkit ...`. MPI is started only when
 * the process was launched by an MPI launcher; otherwise, and in builds
 * without MPI, the command is a single rank 0 of 1. Only rank 0 prints
 * progress and writes shared outputs. */
#ifndef PAIRKIT_CLI_MPI_H
#define PAIRKIT_CLI_MPI_H

#include <stddef.h>
#include <stdint.h>

#include "pairkit/pairkit.h"

/* 1 when this build can run its commands as MPI ranks. */
int cli_mpi_built(void);
void cli_mpi_init(int *argc, char ***argv);
/* The CUDA device of this rank: its rank among the ranks of its node,
 * modulo the node's visible devices (0 when there is one rank or no
 * device). */
int cli_mpi_cuda_device(void);
void cli_mpi_finalize(void);
int cli_mpi_rank(void);
int cli_mpi_size(void);

/* 1 on every rank when `ok` is non-zero on every rank (collective). */
int cli_mpi_all_ok(int ok);
/* Sum n values onto rank 0 (in place there; others' buffers unchanged). */
int cli_mpi_sum_u64(uint64_t *values, size_t n);
/* Sum n doubles onto rank 0 (in place there). */
int cli_mpi_sum_double(double *values, size_t n);
/* Gather `count` bytes from every rank into `all` on rank 0 (rank order). */
int cli_mpi_gather_bytes(const void *mine, size_t count, void *all);
/* Largest value over the ranks, on every rank. */
double cli_mpi_max(double v);
/* 1 when every rank passes the same v (always outside mpirun). */
int cli_mpi_same_u64(uint64_t v);
/* FNV-1a over the 64-bit words of n bytes, in four interleaved lanes
 * folded together with n, then the words past the last 32 bytes (the last
 * ones zero-padded), from h (start with CLI_HASH_START): what the ranks
 * compare of the inputs they read, so that one reading another copy is
 * seen. Not a persistent format: ranks of one binary compare it. */
#define CLI_HASH_START 0xcbf29ce484222325ull
uint64_t cli_hash_bytes(uint64_t h, const void *p, size_t n);
/* Under mpirun, where each rank reads the inputs itself: whether every
 * rank read the same input at path, by h, the hash of what it read. When
 * not (one rank reading another copy, a stale file on one node's disk,
 * would mix two inputs' results without a word) ctx's message says so,
 * naming path and what ("catalogs", "visibilities", "traces"), and the
 * answer is PK_ERR_PARSE; PK_OK outside mpirun. Every rank calls it. */
pk_status cli_mpi_same_input(pk_context *ctx, uint64_t h, const char *path, const char *what);
/* 1 once cli_mpi_same_input has failed: the error every rank holds is the
 * same, and cli_error lets rank 0 alone print it. */
int cli_mpi_error_shared(void);
void cli_mpi_barrier(void);
/* Seconds this rank spent inside the collectives above (waiting for the
 * slowest rank included). */
double cli_mpi_comm_seconds(void);

#endif
