/* rendezvous.c - rank, size and the store url, from options, torchrun's
 * variables, or the variables of the launcher that started us. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bootstrap.h"
#include "error.h"
#include "loader.h"

/* Digits only, at most max: what a launcher writes. strtol alone would
 * take " 3", "+3" and "3x" wraps nothing, but a typo must not pass. */
static int parse_uint(const char *v, long max, long *out)
{
    if (!v || !*v || strlen(v) > 9)
        return -1;
    for (const char *p = v; *p; p++)
        if (*p < '0' || *p > '9')
            return -1;
    *out = strtol(v, NULL, 10);
    return *out > max ? -1 : 0;
}

int plx__env_uint(const char *name, long max, long *out)
{
    return parse_uint(getenv(name), max, out);
}

static int env_int(const char *name, const char *launcher, int *out)
{
    const char *v = getenv(name);
    if (!v || !*v)
        return 0;
    long x;
    if (parse_uint(v, 1 << 24, &x) != 0)
        return plx__err(PLX_ERR_INVALID_ARG, "environment variable %s='%s' is not a valid rank or size (a number "
                        "from 0 to %d; set by %s?)", name, v, 1 << 24, launcher);
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
        const char *const *l = launchers[i];
        if ((rc = env_int(l[0], l[4], &rank)) < 0)
            return rc;
        if (rc == 0)
            continue;
        if ((rc = env_int(l[1], l[4], &size)) <= 0)
            return rc < 0 ? rc
                          : plx__err(PLX_ERR_INVALID_ARG, "%s is set but %s is not (launched by %s?)",
                                     launchers[i][0], launchers[i][1], launchers[i][4]);
        r->rank = rank;
        r->size = size;
        /* srun --mpi=pmi2 sets MPICH's PMI variables too: the launcher is Slurm. */
        const char *mpi_type = getenv("SLURM_MPI_TYPE");
        r->source = !strcmp(l[4], "MPICH") && mpi_type && !strcmp(mpi_type, "pmi2") ? "Slurm's PMI variables" : l[4];
        /* Both from the launcher, or neither: a caller that gives one (a
         * model of 2 hosts x 2 under plexus-run) means its own placement,
         * which the launcher's other value would contradict. */
        int from_launcher = r->local_rank < 0 && r->local_size < 0;
        if (from_launcher && (rc = env_int(l[2], l[4], &r->local_rank)) < 0)
            return rc;
        if (from_launcher && (rc = env_int(l[3], l[4], &r->local_size)) < 0)
            return rc;
        /* SLURM_NTASKS_PER_NODE is the allocation's, which a smaller step
         * inside it inherits: not this step's count when it exceeds it. */
        if (!strcmp(l[4], "Slurm") && r->local_size > size)
            r->local_size = -1;
        r->vars = l;
        return 1;
    }
    return 0;
}

/* Rank, size, local rank and local size agree with each other; the error
 * names the variables they came from (r->vars, or the options). */
static int check_placement(const struct plx__rendezvous *r)
{
    static const char *const from_options[4] = {"rank", "size", "local_rank", "local_size"};
    const char *const *n = r->vars ? r->vars : from_options;
    const char *src = r->source;
    if (r->size < 1)
        return plx__err(PLX_ERR_INVALID_ARG, "%s=%d: a world needs at least one rank (from %s)", n[1], r->size, src);
    if (r->rank < 0 || r->rank >= r->size)
        return plx__err(PLX_ERR_INVALID_ARG, "%s=%d is not below %s=%d: rank %d is not inside a world of size %d "
                        "(from %s)", n[0], r->rank, n[1], r->size, r->rank, r->size, src);
    if (r->local_size > r->size)
        return plx__err(PLX_ERR_INVALID_ARG, "%s=%d exceeds %s=%d: more ranks on this host than in the job (from "
                        "%s)", n[3], r->local_size, n[1], r->size, src);
    if (r->local_rank >= r->local_size)
        return plx__err(PLX_ERR_INVALID_ARG, "%s=%d is not below %s=%d (from %s)", n[2], r->local_rank, n[3],
                        r->local_size, src);
    return 0;
}

/* One host or several, where the launcher says (before local_size gets
 * its default): its local size, or a Slurm step of one node that is this
 * job (srun --mpi=pmi2 gives MPICH's variables, without local ones). */
static int placement(const struct plx__rendezvous *r)
{
    if (r->local_size > 0)
        return r->local_size == r->size ? PLX__PLACE_ONE_HOST : PLX__PLACE_HOSTS;
    const char *nodes = getenv("SLURM_STEP_NUM_NODES"), *ntasks = getenv("SLURM_STEP_NUM_TASKS");
    long nn, nt;
    if (!strcmp(r->source, "options") || parse_uint(nodes, 1 << 24, &nn) || parse_uint(ntasks, 1 << 24, &nt) ||
        nt != r->size)
        return PLX__PLACE_UNKNOWN;
    return nn == 1 ? PLX__PLACE_ONE_HOST : PLX__PLACE_HOSTS;
}

/* MASTER_ADDR and MASTER_PORT, where the store url comes from them: a
 * port the store could not listen on is refused here, naming it, not left
 * to getaddrinfo's words or a port wrapped modulo 65536. */
int plx__rendezvous_check_master(const char *addr, const char *port)
{
    long p;
    if (!addr || !*addr)
        return plx__err(PLX_ERR_INVALID_ARG, "MASTER_ADDR is set but empty: it must name the host of rank 0");
    if (strpbrk(addr, " /\t"))
        return plx__err(PLX_ERR_INVALID_ARG, "MASTER_ADDR='%s' is not a host name or address", addr);
    if (parse_uint(port, 65535, &p) != 0 || p == 0)
        return plx__err(PLX_ERR_INVALID_ARG, "MASTER_PORT='%s' is not a TCP port (a number from 1 to 65535)",
                        port ? port : "");
    return 0;
}

/* Rank, size and placement: the options', else the launcher's variables. */
static int resolve_ranks(const struct plx_comm_options *opt, struct plx__rendezvous *r)
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
            if (opt->rank < 0 && opt->size < 0 && opt->local_rank < 0 && opt->local_size < 0)
                r->vars = e.vars;
            r->local_rank = e.local_rank;
            r->local_size = e.local_size;
            r->source = e.source;
        } else {
            if (r->size < 0)
                r->size = 1;
            if (r->rank < 0)
                r->rank = 0;
            if (opt->rank < 0 && opt->size < 0) /* else one of them is the caller's, named in errors */
                r->source = "default";
        }
    }
    r->place = placement(r);
    if (r->local_rank < 0)
        r->local_rank = r->local_size < 0 ? r->rank : r->rank % r->local_size;
    if (r->local_size < 0)
        r->local_size = r->size;
    return check_placement(r);
}

/* No store named and more than one rank: a process manager's (PMIx, PMI,
 * Slurm), else none: the backend must bootstrap itself. */
static void from_process_manager(struct plx__rendezvous *r)
{
    if (plx__rendezvous_pmix(r)) {
        r->bootstrap = "PMIx";
        return;
    }
    char no_pmix[sizeof r->why], passed[sizeof r->why];
    snprintf(no_pmix, sizeof no_pmix, "%s", r->why);
    /* Slurm's pmi2 plugin takes one PMI-1 'init' a process: after plexus's,
     * an MPI library in the same process (mpi-mpich) could not start. Slurm's
     * own variables serve there, as before. */
    const char *mpi_type = getenv("SLURM_MPI_TYPE");
    int slurm_pmi2 = mpi_type && !strcmp(mpi_type, "pmi2");
    if (!slurm_pmi2 && plx__rendezvous_pmi(r)) {
        r->bootstrap = "PMI";
        return;
    }
    if (plx__rendezvous_slurm(r, r->url, sizeof r->url, r->why, sizeof r->why)) {
        r->bootstrap = "Slurm";
        return;
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

int plx__rendezvous_resolve(const struct plx_comm_options *opt, struct plx__rendezvous *r)
{
    int bad = resolve_ranks(opt, r);
    if (bad)
        return bad;
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
    const char *addr = getenv("MASTER_ADDR"), *port = getenv("MASTER_PORT");
    /* Where they name the store (env://, or nothing else said): checked
     * before anything reads them. */
    if ((!init || !strcmp(init, "env://")) && addr && port && (bad = plx__rendezvous_check_master(addr, port)))
        return bad;
    int agent = plx__rendezvous_torchelastic(init, r);
    if (agent != 0) {
        r->bootstrap = "torchrun's agent store";
        snprintf(r->why, sizeof r->why, "TORCHELASTIC_USE_AGENT_STORE=True: torchrun's agent hosts the store");
        return agent < 0 ? agent : 0;
    }
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
    } else {
        from_process_manager(r);
    }
    return 0;
}
