/* launcher_slurm.c - the rendezvous of a Slurm job step from Slurm's own
 * variables: the store at the first host of the step's node list, rank 0
 * hosting, on a port every task of the step derives alike from the job and
 * step ids, so that two steps of one job never meet on one port. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bootstrap.h"

/* The ports this derivation uses: above the usual ephemeral-range floor of
 * many clusters' reserved services, below Linux's ephemeral range. */
#define SLURM_PORT_BASE 20000
#define SLURM_PORT_SPAN 12000

int plx__slurm_first_host(const char *list, char *out, size_t n)
{
    size_t o = 0;
    const char *p = list;
    if (!list || !*list || n == 0)
        return -1;
    while (*p && *p != ',') {
        if (*p == '[') {
            /* "[07-09,12]": the first value, its zero padding kept. */
            p++;
            while (*p && *p != '-' && *p != ',' && *p != ']') {
                if (o + 1 >= n)
                    return -1;
                out[o++] = *p++;
            }
            while (*p && *p != ']')
                p++;
            if (*p != ']')
                return -1;
            p++;
            continue;
        }
        if (*p == ']' || o + 1 >= n)
            return -1;
        out[o++] = *p++;
    }
    out[o] = '\0';
    return o ? 0 : -1;
}

static int env_ulong(const char *name, unsigned long *out)
{
    const char *v = getenv(name);
    char *end;
    if (!v || !*v)
        return -1;
    *out = strtoul(v, &end, 10);
    return *end ? -1 : 0;
}

int plx__slurm_port(unsigned long job, unsigned long step)
{
    /* Steps of one job take consecutive ids: consecutive ports. Jobs spread
     * by a multiplier prime to the span. */
    return SLURM_PORT_BASE + (int)((job * 7919UL + step) % SLURM_PORT_SPAN);
}

int plx__rendezvous_slurm(const struct plx__rendezvous *r, char *url, size_t n, char *why, size_t wn)
{
    unsigned long job, step, procid, ntasks;
    const char *nodes = getenv("SLURM_STEP_NODELIST");
    char host[256];
    if (env_ulong("SLURM_PROCID", &procid) || env_ulong("SLURM_NTASKS", &ntasks) ||
        env_ulong("SLURM_JOB_ID", &job) || env_ulong("SLURM_STEP_ID", &step) || !nodes) {
        snprintf(why, wn, "not a Slurm job step (SLURM_PROCID, SLURM_NTASKS, SLURM_JOB_ID, SLURM_STEP_ID "
                          "and SLURM_STEP_NODELIST are not all set)");
        return 0;
    }
    /* A launcher inside an allocation (mpirun in sbatch) starts tasks that
     * inherit its step's variables: they only describe us if they agree. */
    if (procid != (unsigned long)r->rank || ntasks != (unsigned long)r->size) {
        snprintf(why, wn, "Slurm's SLURM_PROCID=%lu/SLURM_NTASKS=%lu are not this rank %d of %d (%s started it)",
                 procid, ntasks, r->rank, r->size, r->source);
        return 0;
    }
    if (plx__slurm_first_host(nodes, host, sizeof host) != 0) {
        snprintf(why, wn, "SLURM_STEP_NODELIST='%s' is not a host list plexus reads", nodes);
        return 0;
    }
    int port = plx__slurm_port(job, step);
    snprintf(url, n, "tcp://%s:%d", host, port);
    snprintf(why, wn, "Slurm step %lu.%lu: store on the step's first host %s, port %d derived from the job "
                      "and step ids",
             job, step, host, port);
    return 1;
}
