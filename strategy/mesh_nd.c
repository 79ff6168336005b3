/* mesh_nd.c - an N-D device mesh: named dimensions over a row-major rank
 * layout, one communicator per dimension built with plx_comm_split. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plexus/parallel.h"

struct plx_nd_mesh {
    int ndims, world_size, rank;
    char *names[PLX_MESH_MAX_DIMS];
    int sizes[PLX_MESH_MAX_DIMS], coords[PLX_MESH_MAX_DIMS];
    struct plx_comm *comms[PLX_MESH_MAX_DIMS];
};

/* Check the dimensions and fill m's sizes (inferring a -1). */
static int take_dims(struct plx_nd_mesh *m, int P, const char *const *names, const int *sizes)
{
    int infer = -1;
    long prod = 1;
    for (int d = 0; d < m->ndims; d++) {
        if (!names[d] || !*names[d])
            return plx_set_error(PLX_ERR_INVALID_ARG, "plx_nd_mesh_create: dimension %d has no name", d);
        for (int e = 0; e < d; e++)
            if (!strcmp(names[d], names[e]))
                return plx_set_error(PLX_ERR_INVALID_ARG, "plx_nd_mesh_create: dimension name '%s' is used twice",
                                names[d]);
        if (sizes[d] == -1 && infer < 0) {
            infer = d;
            continue;
        }
        if (sizes[d] <= 0)
            return plx_set_error(PLX_ERR_INVALID_ARG,
                            "plx_nd_mesh_create: dimension '%s' has size %d (sizes are positive; one may be -1)",
                            names[d], sizes[d]);
        prod *= sizes[d];
        if (prod > P)
            break;
        m->sizes[d] = sizes[d];
    }
    if (infer >= 0 && prod <= P && P % prod == 0)
        m->sizes[infer] = (int)(P / prod), prod = P;
    if (prod != P) {
        char dims[256] = "";
        size_t n = 0;
        for (int d = 0; d < m->ndims && n < sizeof dims - 24; d++)
            n += (size_t)snprintf(dims + n, sizeof dims - n, "%s%s=%d", d ? " x " : "", names[d], sizes[d]);
        return plx_set_error(PLX_ERR_INVALID_ARG, "plx_nd_mesh_create: dimensions %s do not multiply to the world size %d",
                        dims, P);
    }
    return 0;
}

PLX_API int plx_nd_mesh_create(struct plx_comm *world, int ndims, const char *const *names, const int *sizes,
                               struct plx_nd_mesh **out)
{
    if (!world || !names || !sizes || !out)
        return plx_set_error(PLX_ERR_INVALID_ARG, "plx_nd_mesh_create: world, names, sizes or out is NULL");
    *out = NULL;
    if (ndims < 1 || ndims > PLX_MESH_MAX_DIMS)
        return plx_set_error(PLX_ERR_INVALID_ARG, "plx_nd_mesh_create: %d dimensions (1 .. %d are supported)", ndims,
                        PLX_MESH_MAX_DIMS);
    struct plx_nd_mesh *m = calloc(1, sizeof *m);
    if (!m)
        return plx_set_error(PLX_ERR_NOMEM, "plx_nd_mesh_create: out of memory");
    m->ndims = ndims;
    m->world_size = plx_comm_size(world);
    m->rank = plx_comm_rank(world);
    int rc = take_dims(m, m->world_size, names, sizes);
    for (int d = 0; d < ndims && !rc; d++)
        if (!(m->names[d] = strdup(names[d])))
            rc = plx_set_error(PLX_ERR_NOMEM, "plx_nd_mesh_create: out of memory");
    if (rc) {
        plx_nd_mesh_destroy(m);
        return rc;
    }
    plx_nd_mesh_coords_of(m, m->rank, m->coords);
    /* Ranks that share every coordinate but d form d's communicator: the
     * color is the rank with coordinate d zeroed, the key the coordinate. */
    int stride = 1;
    for (int d = ndims - 1; d >= 0; d--) {
        int color = m->rank - m->coords[d] * stride;
        if ((rc = plx_comm_split(world, color, m->coords[d], &m->comms[d])) != 0) {
            plx_error_prefix("plx_nd_mesh_create: dimension '%s': ", m->names[d]);
            plx_nd_mesh_destroy(m);
            return rc;
        }
        stride *= m->sizes[d];
    }
    *out = m;
    return 0;
}

PLX_API void plx_nd_mesh_destroy(struct plx_nd_mesh *m)
{
    if (!m)
        return;
    for (int d = 0; d < m->ndims; d++) {
        plx_comm_destroy(m->comms[d]);
        free(m->names[d]);
    }
    free(m);
}

static int bad_dim(const struct plx_nd_mesh *m, int dim, const char *what)
{
    if (!m)
        return plx_set_error(PLX_ERR_INVALID_ARG, "%s: mesh is NULL", what);
    if (dim < 0 || dim >= m->ndims)
        return plx_set_error(PLX_ERR_INVALID_ARG, "%s: dimension %d of a %d-D mesh", what, dim, m->ndims);
    return 0;
}

PLX_API int plx_nd_mesh_ndims(const struct plx_nd_mesh *m)
{
    return m ? m->ndims : plx_set_error(PLX_ERR_INVALID_ARG, "plx_nd_mesh_ndims: mesh is NULL");
}

PLX_API int plx_nd_mesh_dim(const struct plx_nd_mesh *m, const char *name)
{
    if (!m || !name)
        return plx_set_error(PLX_ERR_INVALID_ARG, "plx_nd_mesh_dim: mesh or name is NULL");
    for (int d = 0; d < m->ndims; d++)
        if (!strcmp(m->names[d], name))
            return d;
    return plx_set_error(PLX_ERR_NOT_FOUND, "plx_nd_mesh_dim: the mesh has no dimension '%s'", name);
}

PLX_API const char *plx_nd_mesh_name(const struct plx_nd_mesh *m, int dim)
{
    return bad_dim(m, dim, "plx_nd_mesh_name") ? NULL : m->names[dim];
}

PLX_API int plx_nd_mesh_size(const struct plx_nd_mesh *m, int dim)
{
    int rc = bad_dim(m, dim, "plx_nd_mesh_size");
    return rc ? rc : m->sizes[dim];
}

PLX_API int plx_nd_mesh_coord(const struct plx_nd_mesh *m, int dim)
{
    int rc = bad_dim(m, dim, "plx_nd_mesh_coord");
    return rc ? rc : m->coords[dim];
}

PLX_API struct plx_comm *plx_nd_mesh_comm(const struct plx_nd_mesh *m, int dim)
{
    return bad_dim(m, dim, "plx_nd_mesh_comm") ? NULL : m->comms[dim];
}

PLX_API int plx_nd_mesh_rank_at(const struct plx_nd_mesh *m, const int *coords)
{
    if (!m || !coords)
        return plx_set_error(PLX_ERR_INVALID_ARG, "plx_nd_mesh_rank_at: mesh or coords is NULL");
    int r = 0;
    for (int d = 0; d < m->ndims; d++) {
        if (coords[d] < 0 || coords[d] >= m->sizes[d])
            return plx_set_error(PLX_ERR_INVALID_ARG, "plx_nd_mesh_rank_at: coordinate %d along '%s' (size %d)", coords[d],
                            m->names[d], m->sizes[d]);
        r = r * m->sizes[d] + coords[d];
    }
    return r;
}

PLX_API int plx_nd_mesh_coords_of(const struct plx_nd_mesh *m, int rank, int *coords)
{
    if (!m || !coords)
        return plx_set_error(PLX_ERR_INVALID_ARG, "plx_nd_mesh_coords_of: mesh or coords is NULL");
    if (rank < 0 || rank >= m->world_size)
        return plx_set_error(PLX_ERR_INVALID_ARG, "plx_nd_mesh_coords_of: rank %d of a world of %d", rank, m->world_size);
    for (int d = m->ndims - 1; d >= 0; d--) {
        coords[d] = rank % m->sizes[d];
        rank /= m->sizes[d];
    }
    return 0;
}
