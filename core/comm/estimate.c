/* estimate.c - plx_comm_estimate: a collective's modelled time from the
 * table of [core] estimates. */
#include "error.h"

PLX_API int plx_comm_estimate(const struct plx_comm *comm, int coll, size_t bytes, double *seconds)
{
    if (!comm || !seconds || coll < 0 || coll >= PLX_COLL_COUNT)
        return plx__err(PLX_ERR_INVALID_ARG, "plx_comm_estimate: %s",
                        !comm ? "comm is NULL" : !seconds ? "seconds is NULL" : "no such collective");
    (void)bytes;
    return plx__err(PLX_ERR_UNSUPPORTED, "plx_comm_estimate: no [core] estimates table is configured");
}
