/* matrix.h - the collective matrix the collective tests share: how each
 * collective's send and receive buffers are filled for a rank, count, dtype
 * and op, and how every element of the result is checked against a serial
 * reference (check_values.h: small integers, so every dtype's result is
 * exact and compared with ==). The drivers keep how they start ranks and
 * which combinations they run. Internal to the tests. */
#ifndef PLEXUS_TEST_MATRIX_H
#define PLEXUS_TEST_MATRIX_H

#include <stddef.h>

#include "plexus/plexus.h"

/* One case: coll on count elements per rank (the root is the last rank). */
struct matrix_case {
    int coll, dtype, op;
    size_t count;
    int inplace;     /* the receive buffer doubles as the send buffer, or the reverse */
    int nonblocking; /* plx_i* and plx_work_wait instead of the blocking call */
};

/* Nonzero for the collectives that take a reduction op. */
int matrix_is_reduction(int coll);
/* 1 if op is defined on dt (the bitwise ops take integer types only). */
int matrix_op_fits(int dt, int op);

/* Elements in the send (*s) and receive (*r) buffers of coll for count n
 * on P ranks. */
void matrix_sizes(int coll, size_t n, int P, size_t *s, size_t *r);

/* Runs one case on this rank of c with the borrowed buffers sb and rb,
 * each large enough for matrix_sizes() elements of the dtype plus 8 bytes,
 * and checks every element it received; a rooted collective must also
 * leave a non-root's receive buffer alone. Returns the number of wrong
 * elements (the first 3 printed), or -1 when the collective itself failed
 * (printed with plexus's last error). */
long matrix_case(struct plx_comm *c, const struct matrix_case *k, char *sb, char *rb);

/* Returns nonzero to leave out a combination: counts[k] is n. */
typedef int matrix_skip_fn(int coll, int dtype, int op, size_t n, void *arg);

/* Runs every collective x dtype x op (every op for the reductions, one for
 * the rest) x counts x {out of place, in place} on c, the barrier once, less
 * what skip (may be NULL) leaves out, and adds the cases run to *cases.
 * Returns the number of wrong elements, or -1 when a collective failed (it
 * stops there) or the buffers could not be allocated. */
long matrix_run(struct plx_comm *c, int nonblocking, const size_t *counts, size_t ncounts, matrix_skip_fn *skip,
                void *arg, int *cases);

#endif
