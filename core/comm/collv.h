/* collv.h - the per-rank counts and displacements of alltoallv and
 * allgatherv. collv.c copies them into one core-owned block that the
 * ABI 1.4 fields of plx_coll_args point into (recv_counts at its start,
 * then recv_displs, send_counts, send_displs): a native plugin of minor 4+
 * and the core's generic algorithms read the same arrays. The block lives
 * as long as the work (freed with it). Stability: internal. */
#ifndef PLX_CORE_COLLV_H
#define PLX_CORE_COLLV_H

#include <stddef.h>

#include "callname.h"
#include "plexus/backend.h"

static inline int plx__coll_is_v(int coll)
{
    return plx__call_is_v(coll);
}

/* Free a's layout block (work.c, executor.c, when a work is freed). No-op
 * for other collectives. */
void plx__vspec_release(struct plx_coll_args *a);

#endif
