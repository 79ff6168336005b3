/* mesh.c - a 2-D device mesh (nodes x local ranks) over a communicator:
 * the intra-node and inter-node sub-communicators, built with split. */
#include <stdlib.h>

#include "error.h"
#include "plexus/strategy.h"

struct plx_mesh {
    struct plx_comm *intra, *inter;
    int nodes, local;
};

PLX_API int plx_mesh_create(struct plx_comm *world, int local_size, struct plx_mesh **out)
{
    if (!world || !out)
        return plx__err(PLX_ERR_INVALID_ARG, "plx_mesh_create: world or out is NULL");
    *out = NULL;
    int P = plx_comm_size(world), r = plx_comm_rank(world);
    int L = local_size > 0 ? local_size : plx_comm_local_size(world);
    if (L <= 0 || P % L)
        return plx__err(PLX_ERR_INVALID_ARG,
                        "plx_mesh_create: world size %d is not a multiple of the node size %d (set LOCAL_WORLD_SIZE "
                        "or pass local_size)", P, L);
    struct plx_mesh *m = calloc(1, sizeof *m);
    if (!m)
        return plx__err(PLX_ERR_NOMEM, "plx_mesh_create: out of memory");
    m->nodes = P / L;
    m->local = L;
    int rc = plx_comm_split(world, r / L, r % L, &m->intra);
    if (rc == 0)
        rc = plx_comm_split(world, r % L, r / L, &m->inter);
    if (rc) {
        plx_mesh_destroy(m);
        return rc;
    }
    *out = m;
    return 0;
}

PLX_API void plx_mesh_destroy(struct plx_mesh *m)
{
    if (!m)
        return;
    plx_comm_destroy(m->intra);
    plx_comm_destroy(m->inter);
    free(m);
}

PLX_API struct plx_comm *plx_mesh_intra(const struct plx_mesh *m)
{
    return m ? m->intra : NULL;
}

PLX_API struct plx_comm *plx_mesh_inter(const struct plx_mesh *m)
{
    return m ? m->inter : NULL;
}

PLX_API int plx_mesh_nodes(const struct plx_mesh *m)
{
    return m ? m->nodes : PLX_ERR_INVALID_ARG;
}
