/* fsdp_clip.c - global gradient-norm clipping as
 * torch.nn.utils.clip_grad_norm_ and FSDP's clip_grad_norm_: the p-norm
 * (or the largest magnitude) over every unit's gradient shard, combined over
 * the shard group (shards of one group are disjoint; HYBRID_SHARD's nodes
 * hold the same values, NO_SHARD's ranks the whole gradient), then every
 * gradient scaled by max_norm / (total + 1e-6) when that is below 1. */
#include <math.h>

#include "fsdp_internal.h"

PLX_API int plx_fsdp_clip_grad_norm_p(struct plx_fsdp *f, double max_norm, double norm_type, double *total_norm)
{
    if (!f || !(norm_type > 0))
        return plx_set_error(PLX_ERR_INVALID_ARG, "plx_fsdp_clip_grad_norm_p: %s", f ? "norm_type must be > 0 or INFINITY"
                                                                                  : "fsdp is NULL");
    int rc = plx_fsdp_wait_grad(f, -1);
    if (rc)
        return rc;
    int inf = isinf(norm_type), two = norm_type == 2.0;
    double acc = 0; /* sum of |g|^p, or the largest |g| */
    for (int k = 0; k < f->nunits; k++) {
        struct fsdp_unit *u = &f->units[k];
        for (size_t i = 0; i < u->valid; i++) { /* padding never counts */
            double g = fabs(plx__fsdp_get(u->grad, u->dtype, i));
            if (inf)
                acc = g > acc ? g : acc;
            else
                acc += two ? g * g : pow(g, norm_type);
        }
    }
    if (f->shard_comm && f->shards > 1 &&
        (rc = plx_allreduce(f->shard_comm, &acc, &acc, 1, PLX_F64, inf ? PLX_MAX : PLX_SUM)) != 0)
        return rc;
    double total = inf ? acc : two ? sqrt(acc) : pow(acc, 1.0 / norm_type);
    if (total_norm)
        *total_norm = total;
    double coef = max_norm / (total + 1e-6);
    if (max_norm >= 0 && coef < 1.0)
        for (int k = 0; k < f->nunits; k++)
            plx__fsdp_scale(f->units[k].grad, f->units[k].dtype, f->units[k].valid, coef);
    return 0;
}

PLX_API int plx_fsdp_clip_grad_norm(struct plx_fsdp *f, double max_norm, double *norm)
{
    return plx_fsdp_clip_grad_norm_p(f, max_norm > 0 ? max_norm : -1.0, 2.0, norm);
}
