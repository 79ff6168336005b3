/* rendezvous.c - rank, size and the store url, from options, torchrun's
 * variables, or the variables of the launcher that started us. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "comm.h"
#include "error.h"

static int env_int(const char *name, int *out)
{
    const char *v = getenv(name);
    if (!v || !*v)
        return 0;
    char *end;
    long x = strtol(v, &end, 10);
    if (*end || x < 0 || x > 1 << 24)
        return plx__err(PLX_ERR_INVALID_ARG, "environment variable %s='%s' is not a valid rank or size", name, v);
    *out = (int)x;
    return 1;
}

/* Launcher dialects: [rank var, size var, local rank, local size, label]. */
static const char *const launchers[][5] = {
    {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "torchrun"},
    {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE", "Open MPI"},
    {"PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS", "MPICH"},
    {"SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE", "Slurm"},
};

static int from_env(struct plx__rendezvous *r)
{
    for (size_t i = 0; i < sizeof launchers / sizeof launchers[0]; i++) {
        int rank, size, rc;
        if ((rc = env_int(launchers[i][0], &rank)) < 0)
            return rc;
        if (rc == 0)
            continue;
        if ((rc = env_int(launchers[i][1], &size)) <= 0)
            return rc < 0 ? rc
                          : plx__err(PLX_ERR_INVALID_ARG, "%s is set but %s is not (launched by %s?)",
                                     launchers[i][0], launchers[i][1], launchers[i][4]);
        r->rank = rank;
        r->size = size;
        r->source = launchers[i][4];
        if (r->local_rank < 0 && (rc = env_int(launchers[i][2], &r->local_rank)) < 0)
            return rc;
        if (r->local_size < 0 && (rc = env_int(launchers[i][3], &r->local_size)) < 0)
            return rc;
        return 1;
    }
    return 0;
}

int plx__rendezvous_resolve(const struct plx_comm_options *opt, struct plx__rendezvous *r)
{
    memset(r, 0, sizeof *r);
    r->rank = opt->rank;
    r->size = opt->size;
    r->local_rank = opt->local_rank;
    r->local_size = opt->local_size;
    r->source = "options";
    if (r->rank < 0 || r->size < 0) {
        struct plx__rendezvous e = {.local_rank = r->local_rank, .local_size = r->local_size};
        int rc = from_env(&e);
        if (rc < 0)
            return rc;
        if (rc > 0) {
            if (r->rank < 0)
                r->rank = e.rank;
            if (r->size < 0)
                r->size = e.size;
            r->local_rank = e.local_rank;
            r->local_size = e.local_size;
            r->source = e.source;
        } else {
            if (r->size < 0)
                r->size = 1;
            if (r->rank < 0)
                r->rank = 0;
            r->source = "default";
        }
    }
    if (r->size < 1 || r->rank < 0 || r->rank >= r->size)
        return plx__err(PLX_ERR_INVALID_ARG, "rank %d is not inside a world of size %d (from %s)", r->rank,
                        r->size, r->source);
    if (r->local_rank < 0)
        r->local_rank = r->rank;
    if (r->local_size < 0)
        r->local_size = r->size;

    if (opt->store) { /* the caller's own store (plx_store_callbacks) */
        if (opt->init)
            return plx__err(PLX_ERR_INVALID_ARG, "options give both a store and init '%s': pass one", opt->init);
        snprintf(r->url, sizeof r->url, "external://");
        r->bootstrap = "caller's store";
        snprintf(r->why, sizeof r->why, "the options carry the caller's store callbacks");
        return 0;
    }
    const char *init = opt->init ? opt->init : getenv("PLEXUS_INIT");
    const char *init_from = opt->init ? "options' init" : "PLEXUS_INIT";
    int agent = plx__rendezvous_torchelastic(init, r);
    if (agent != 0) {
        r->bootstrap = "torchrun's agent store";
        snprintf(r->why, sizeof r->why, "TORCHELASTIC_USE_AGENT_STORE=True: torchrun's agent hosts the store");
        return agent < 0 ? agent : 0;
    }
    const char *addr = getenv("MASTER_ADDR"), *port = getenv("MASTER_PORT");
    if (init && !strcmp(init, "none")) {
        r->url[0] = '\0';
        r->bootstrap = "none";
        snprintf(r->why, sizeof r->why, "%s is 'none': the backend bootstraps itself", init_from);
    } else if (init && strcmp(init, "env://")) {
        snprintf(r->url, sizeof r->url, "%s", init);
        r->bootstrap = init_from;
        snprintf(r->why, sizeof r->why, "%s names the store", init_from);
    } else if (addr && port) {
        snprintf(r->url, sizeof r->url, "tcp://%s:%s", addr, port);
        r->bootstrap = "MASTER_ADDR";
        snprintf(r->why, sizeof r->why, "MASTER_ADDR and MASTER_PORT are set");
    } else if (init) {
        return plx__err(PLX_ERR_INVALID_ARG, "init 'env://' needs MASTER_ADDR and MASTER_PORT in the environment");
    } else if (r->size == 1) {
        /* A job of one: a private in-process store. */
        static unsigned long solo_count;
        snprintf(r->url, sizeof r->url, "mem://solo-%d-%lu", (int)getpid(),
                 __atomic_add_fetch(&solo_count, 1, __ATOMIC_RELAXED));
        r->bootstrap = "in-process";
        snprintf(r->why, sizeof r->why, "a job of one rank needs no rendezvous");
    } else if (plx__rendezvous_pmix(r)) {
        r->bootstrap = "PMIx";
    } else {
        char no_pmix[sizeof r->why], passed[sizeof r->why];
        snprintf(no_pmix, sizeof no_pmix, "%s", r->why);
        if (plx__rendezvous_pmi(r)) {
            r->bootstrap = "PMI";
            return 0;
        }
        if (plx__rendezvous_slurm(r, r->url, sizeof r->url, r->why, sizeof r->why)) {
            r->bootstrap = "Slurm";
            return 0;
        }
        snprintf(passed, sizeof passed, "%s", r->why);
        r->url[0] = '\0'; /* the backend must bootstrap itself (e.g. MPI) */
        r->bootstrap = "none";
        /* Each reason whole: a cut one reads as a typo (plexus-info prints this). */
        const char *parts[] = {"no PLEXUS_INIT, no MASTER_ADDR/MASTER_PORT, ", no_pmix, ", and ", passed,
                               ": the backend must bootstrap itself (mpi does; tcp and shm need a store)"};
        size_t at = 0;
        for (size_t i = 0; i < sizeof parts / sizeof *parts; i++) {
            size_t k = strlen(parts[i]);
            k = k < sizeof r->why - 1 - at ? k : sizeof r->why - 1 - at;
            memcpy(r->why + at, parts[i], k);
            at += k;
        }
        r->why[at] = '\0';
    }
    return 0;
}
