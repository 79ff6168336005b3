/* collv.h - the per-rank counts and displacements of alltoallv and
 * allgatherv. These collectives never reach a backend (ABI 1.2 has no
 * field for them): the core runs them with its generic algorithms, and a
 * core-owned struct plx__vspec rides in plx_coll_args.stream, which host
 * collectives on the generic path leave unused. Stability: internal. */
#ifndef PLX_CORE_COLLV_H
#define PLX_CORE_COLLV_H

#include <stddef.h>

#include "plexus/backend.h"

struct plx__vspec {
    size_t *scounts, *sdispls; /* alltoallv: per destination; NULL for allgatherv */
    size_t *rcounts, *rdispls; /* per source */
    size_t send_count;         /* allgatherv */
    size_t arr[];              /* storage of the arrays */
};

static inline int plx__coll_is_v(int coll)
{
    return coll == PLX_COLL_ALLTOALLV || coll == PLX_COLL_ALLGATHERV;
}

static inline const struct plx__vspec *plx__vspec_of(const struct plx_coll_args *a)
{
    return plx__coll_is_v(a->coll) ? (const struct plx__vspec *)a->stream : NULL;
}

/* Free a's vspec (work.c, when a generic work is freed). No-op otherwise. */
void plx__vspec_release(struct plx_coll_args *a);

#endif
