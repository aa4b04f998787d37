/* test_cli_hash - the hash the ranks under mpirun compare of their inputs
 * (tools/pairkit/mpi.c): a change of any one bit, at any offset of inputs
 * of 0 to 100 bytes (each lane, the words after the lanes, the padded
 * tail), or of the length alone, gives another hash; equal inputs the same. */
#include <stdint.h>
#include <string.h>

#include "check.h"
#include "../tools/pairkit/mpi.h"

int main(void) {
    unsigned char buf[104], copy[104];
    uint64_t state = 0x9e3779b97f4a7c15ull;
    for (size_t i = 0; i < sizeof buf; i++) {
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        buf[i] = (unsigned char)(state >> 56);
    }
    long same = 0, flips = 0, lengths = 0;
    for (size_t n = 0; n <= 100; n++) {
        uint64_t h = cli_hash_bytes(CLI_HASH_START, buf, n);
        memcpy(copy, buf, sizeof buf);
        same += cli_hash_bytes(CLI_HASH_START, copy, n) != h;
        for (size_t i = 0; i < n; i++)
            for (int bit = 0; bit < 8; bit++) {
                copy[i] ^= (unsigned char)(1u << bit);
                flips += cli_hash_bytes(CLI_HASH_START, copy, n) == h;
                copy[i] ^= (unsigned char)(1u << bit);
            }
        /* one more byte of 0: the same words after zero-padding */
        memset(copy + n, 0, 1);
        lengths += cli_hash_bytes(CLI_HASH_START, copy, n + 1) == h;
    }
    CHECK(same == 0, "%ld equal inputs hashed differently", same);
    CHECK(flips == 0, "%ld one-bit changes kept the hash", flips);
    CHECK(lengths == 0, "%ld inputs and their zero-extended copies hashed alike", lengths);
    /* the start value counts: the callers chain several arrays */
    CHECK(cli_hash_bytes(1, buf, 64) != cli_hash_bytes(2, buf, 64), "start value ignored");
    return check_finish("test_cli_hash");
}
