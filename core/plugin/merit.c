/* merit.c - the order in which `auto` tries the backends: those of a
 * [core] prefer list first, in its order; then by what each is expected to
 * do for this placement. On one host a transport made for one host (shm:
 * one copy through shared memory) comes before every transport across
 * hosts that also serves host memory (mpi, ucc, tcp: their path within a
 * host is slower), so that a launcher's MPI alone does not move a one-host
 * job onto MPI; a backend of device memory only (nccl) keeps its place.
 * Across hosts, or where the placement is not known, the drop-ins'
 * priorities decide. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "config.h"
#include "error.h"
#include "loader.h"

/* 0: tried first on one host; 1: after those. */
static int placement_class(const struct plx__backend *b, int place)
{
    if (place != PLX__PLACE_ONE_HOST)
        return 0;
    uint32_t kinds = b->caps.mem_kinds;
    int host_memory = !kinds || (kinds & PLX_BIT(PLX_MEM_HOST));
    if (!host_memory)
        return 0;
    return (b->caps.flags & (PLX_CAP_MULTI_NODE | PLX_CAP_IN_PROCESS)) ? 1 : 0;
}

/* Index of b in the [core] prefer list, or the list's length. */
static int prefer_index(const char *prefer, const struct plx__backend *b)
{
    char buf[512];
    snprintf(buf, sizeof buf, "%s", prefer ? prefer : "");
    int i = 0;
    char *save = NULL;
    for (char *t = strtok_r(buf, ", ", &save); t; t = strtok_r(NULL, ", ", &save), i++)
        if (!strcasecmp(t, b->name))
            return i;
    return 1 << 20;
}

int plx__merit_order(const struct plx_config *v, int place, struct plx__backend **order, size_t *n)
{
    const char *prefer = plx__config_get_in(v, "core", "prefer", NULL);
    char buf[512];
    snprintf(buf, sizeof buf, "%s", prefer ? prefer : "");
    char *save = NULL;
    for (char *t = strtok_r(buf, ", ", &save); t; t = strtok_r(NULL, ", ", &save))
        if (!plx__loader_find(t))
            return plx__err(PLX_ERR_CONFIG, "[core] prefer names '%s', which is not a backend here (plexus-info "
                            "lists them)", t);
    *n = plx__loader_count();
    /* The loader's list is in priority order: a stable insertion sort by
     * (prefer, class) keeps that order within each. */
    for (size_t i = 0; i < *n; i++) {
        struct plx__backend *b = plx__loader_at(i);
        int pb = prefer_index(prefer, b), cb = placement_class(b, place);
        size_t j = i;
        while (j > 0) {
            int pa = prefer_index(prefer, order[j - 1]), ca = placement_class(order[j - 1], place);
            if (pa < pb || (pa == pb && ca <= cb))
                break;
            order[j] = order[j - 1];
            j--;
        }
        order[j] = b;
    }
    return 0;
}

void plx__merit_explain(const struct plx_config *v, int place, const struct plx__backend *chosen,
                        struct plx__backend *const *order, size_t n, char *why, size_t wn)
{
    const char *prefer = plx__config_get_in(v, "core", "prefer", NULL);
    if (prefer_index(prefer, chosen) < (1 << 20)) {
        snprintf(why, wn, "auto: first usable of [core] prefer = %s", prefer);
        return;
    }
    const char *where = place == PLX__PLACE_ONE_HOST ? "one host" : place == PLX__PLACE_HOSTS ? "several hosts"
                                                                                               : "placement unknown";
    char passed[256] = "";
    /* The usable ones of higher priority that the placement put after it. */
    for (size_t i = 0; i < n; i++) {
        const struct plx__backend *b = order[i];
        size_t l = strlen(passed);
        if (b != chosen && b->state == PLX_STATE_USABLE && b->priority > chosen->priority &&
            placement_class(b, place) > placement_class(chosen, place))
            snprintf(passed + l, sizeof passed - l, "%s%s", l ? ", " : "", b->name);
    }
    if (passed[0])
        snprintf(why, wn, "auto on %s: %s, a transport made for one host, before %s (across hosts; slower "
                 "within one)", where, chosen->name, passed);
    else
        snprintf(why, wn, "auto (%s): %s, the usable backend of highest priority (%d)", where, chosen->name,
                 chosen->priority);
}
