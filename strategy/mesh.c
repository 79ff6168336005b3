/* mesh.c - the 2-D device mesh (nodes x local ranks): the N-D mesh of
 * mesh_nd.c with dimensions ("node", "local"); intra-node is "local"'s
 * communicator, inter-node "node"'s. */
#include <stdlib.h>

#include "plexus/parallel.h"
#include "plexus/strategy.h"

struct plx_mesh {
    struct plx_nd_mesh *nd;
};

enum { NODE = 0, LOCAL = 1 };

PLX_API int plx_mesh_create(struct plx_comm *world, int local_size, struct plx_mesh **out)
{
    if (!world || !out)
        return plx_set_error(PLX_ERR_INVALID_ARG, "plx_mesh_create: world or out is NULL");
    *out = NULL;
    int P = plx_comm_size(world);
    int L = local_size > 0 ? local_size : plx_comm_local_size(world);
    if (L <= 0 || P % L)
        return plx_set_error(PLX_ERR_INVALID_ARG,
                        "plx_mesh_create: world size %d is not a multiple of the node size %d (set LOCAL_WORLD_SIZE "
                        "or pass local_size)", P, L);
    struct plx_mesh *m = calloc(1, sizeof *m);
    if (!m)
        return plx_set_error(PLX_ERR_NOMEM, "plx_mesh_create: out of memory");
    const char *names[] = {"node", "local"};
    int sizes[] = {P / L, L};
    int rc = plx_nd_mesh_create(world, 2, names, sizes, &m->nd);
    if (rc) {
        free(m);
        return rc;
    }
    *out = m;
    return 0;
}

PLX_API void plx_mesh_destroy(struct plx_mesh *m)
{
    if (!m)
        return;
    plx_nd_mesh_destroy(m->nd);
    free(m);
}

PLX_API struct plx_comm *plx_mesh_intra(const struct plx_mesh *m)
{
    return m ? plx_nd_mesh_comm(m->nd, LOCAL) : NULL;
}

PLX_API struct plx_comm *plx_mesh_inter(const struct plx_mesh *m)
{
    return m ? plx_nd_mesh_comm(m->nd, NODE) : NULL;
}

PLX_API int plx_mesh_nodes(const struct plx_mesh *m)
{
    return m ? plx_nd_mesh_size(m->nd, NODE) : PLX_ERR_INVALID_ARG;
}
