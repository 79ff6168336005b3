/* backend_describe.c - which backend plx_comm_init would choose here and
 * why, for plexus-info: auto's order needs the placement the launcher's
 * variables give, as in plx_comm_init. */
#include <stdio.h>

#include "bootstrap.h"
#include "comm.h"
#include "error.h"
#include "plexus/info.h"

PLX_API int plx_backend_select_why(const char *spec, char *why, size_t n)
{
    struct plx_comm_options o;
    struct plx__rendezvous rv;
    plx_comm_options_init(&o);
    int place = plx__rendezvous_resolve(&o, &rv) == 0 ? rv.place : PLX__PLACE_UNKNOWN;
    plx__err_clear();
    char dummy[8];
    struct plx__backend *b = NULL;
    int rc = plx__loader_select_placed(NULL, spec, NULL, place, &b, why && n ? why : dummy,
                                       why && n ? n : sizeof dummy);
    if (rc)
        return rc;
    for (size_t i = 0; i < plx__loader_count(); i++)
        if (plx__loader_at(i) == b)
            return (int)i;
    return plx__err(PLX_ERR_INTERNAL, "plx_backend_select: the chosen backend is not in the loader's list");
}
