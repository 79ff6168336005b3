/* tuner.h - the allreduce algorithm by size and world size from a table
 * ([core] tuner = FILE), in the spirit of NCCL's tuner plugins: the
 * crossover points a network model gives (plexus-whatif --emit-tuning).
 * A line of the file:
 *
 *     allreduce RANKS FROM_BYTES ALGORITHM     # ring|recdbl|tree|rabenseifner
 *
 * A communicator of P ranks takes the rows of the largest RANKS <= P (of
 * the smallest RANKS when P is below every one), and there the last row
 * with FROM_BYTES <= its message (the first row below them all). Rows come
 * in ascending RANKS, then ascending FROM_BYTES; '#' starts a comment.
 * Self-contained (libc only): plexus-info reads the same file with it.
 * Stability: internal. */
#ifndef PLX_CORE_ALGO_TUNER_H
#define PLX_CORE_ALGO_TUNER_H

#include <stddef.h>

enum { PLX__TUNER_ROWS = 64 };

struct plx__tuner_row {
    int ranks;
    int algo;          /* enum plx__allreduce_algo, never AUTO */
    int line;          /* in the file */
    size_t from_bytes;
};

struct plx__tuner {
    int n;             /* rows; 0: no table, the built-in choice */
    char source[256];  /* the file */
    struct plx__tuner_row rows[PLX__TUNER_ROWS];
};

/* Read path into *t. 0, or -1 with "path:line: what is wrong" (or
 * "path: why it cannot be read") in err. */
int plx__tuner_load(struct plx__tuner *t, const char *path, char *err, size_t errlen);
/* The algorithm of the row that applies to bytes at ranks, its line in
 * *line; 0 (PLX__AR_AUTO) when t has no rows. */
int plx__tuner_pick(const struct plx__tuner *t, int ranks, size_t bytes, int *line);
/* "ring", "recdbl", "tree", "rabenseifner", or "auto". */
const char *plx__tuner_algo_name(int algo);
/* The reverse: the algorithm a name says, 0 (PLX__AR_AUTO) for NULL, "auto"
 * or a name it does not know. */
int plx__tuner_algo_parse(const char *name);

#endif
