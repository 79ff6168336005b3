/* estimates.h - a collective's modelled time by size and world size from a
 * table ([core] estimates = FILE), as plexus-whatif --emit-estimates
 * writes it from a calibrated network model: the time of the algorithm the
 * core would pick at each size. Lines of the file:
 *
 *     backend NAME                  # optional, once: the table is for comms on NAME only
 *     COLL RANKS BYTES SECONDS      # allreduce 4 65536 1.25e-05
 *
 * COLL is a collective's name (plx_coll_name), BYTES the size as
 * plexus-bench counts a row (plexus.h, plx_comm_estimate), SECONDS the
 * modelled time. Rows come in any order; one (COLL, RANKS, BYTES) at most
 * once; '#' starts a comment. A lookup answers exactly at a row's size and,
 * between two rows of one (COLL, RANKS), interpolates linearly in bytes: the
 * model's time is affine in bytes while the algorithm and its schedule stay
 * the same, so a straight line is exact inside such a stretch, where a
 * log-log line would bend above it. It refuses outside the rows' sizes and
 * at a RANKS without rows: another size of world runs another schedule.
 * Self-contained (libc only): plexus-info reads the same file with it.
 * Stability: internal. */
#ifndef PLX_CORE_ALGO_ESTIMATES_H
#define PLX_CORE_ALGO_ESTIMATES_H

#include <stddef.h>

struct plx__estimate_row {
    int coll;          /* enum plx_coll */
    int ranks;
    int line;          /* in the file */
    size_t bytes;
    double seconds;
};

struct plx__estimates {
    int n;             /* rows, sorted by coll, ranks, bytes */
    char backend[64];  /* "": for every backend */
    char source[256];  /* the file */
    struct plx__estimate_row *rows;
};

/* Read path into *t (which the caller frees with plx__estimates_finish,
 * also after an error). 0, or -1 with "path:line: what is wrong" (or
 * "path: why it cannot be read") in err. */
int plx__estimates_load(struct plx__estimates *t, const char *path, char *err, size_t errlen);
void plx__estimates_finish(struct plx__estimates *t);

/* The time of coll at bytes on ranks for a comm on backend into *seconds:
 * 0, or -1 with the reason in why (backend mismatch, no rows at ranks,
 * bytes outside the rows). A barrier's size is 0 whatever bytes says. */
int plx__estimates_lookup(const struct plx__estimates *t, const char *backend, int coll, int ranks, size_t bytes,
                          double *seconds, char *why, size_t whylen);

/* The name of a collective, "?" for none: the table's COLL (libc only, as
 * plx_coll_name says it). The reverse: -1 for a name it does not know. */
const char *plx__estimates_coll_name(int coll);
int plx__estimates_coll_parse(const char *name);

#endif
