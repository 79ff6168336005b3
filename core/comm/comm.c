/* comm.c - communicators: init (config, backend, rendezvous), split,
 * destroy, abort, queries. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bootstrap.h"
#include "comm.h"
#include "config.h"
#include "diag_hooks.h"
#include "error.h"
#include "hier.h"
#include "liveness.h"
#include "log.h"
#include "store.h"

PLX_API void plx_comm_options_init(struct plx_comm_options *opt)
{
    memset(opt, 0, sizeof *opt);
    opt->struct_size = sizeof *opt;
    opt->rank = opt->size = opt->local_rank = opt->local_size = -1;
    opt->timeout_ms = -1;
}

/* Copy the caller's options honouring its struct_size (older callers). */
static void copy_options(const struct plx_comm_options *in, struct plx_comm_options *out)
{
    plx_comm_options_init(out);
    if (in) {
        size_t n = in->struct_size < sizeof *out ? in->struct_size : sizeof *out;
        memcpy(out, in, n);
        out->struct_size = sizeof *out;
    }
}

static int64_t config_int(const struct plx_config *v, const char *key, int64_t def)
{
    int64_t n = def;
    if (plx__config_int_in(v, "core", key, def, &n) != 0)
        plx__log(PLX_LOG_WARN, "core", "%s", plx_last_error());
    return n;
}

/* A communicator's timeout: the options', else [core] timeout_ms through
 * its view v (its declared default when unset). */
static int options_timeout_ms(const struct plx_config *v, const struct plx_comm_options *opt, int64_t *ms)
{
    if (opt->timeout_ms >= 0) {
        *ms = opt->timeout_ms;
        return 0;
    }
    return plx__config_ms_in(v, "core", "timeout_ms", ms);
}

static int load_tuning(struct plx_comm *c)
{
    c->tuning.allreduce_algo = plx__tuner_algo_parse(plx__config_get_in(c->config, "core", "allreduce_algo", NULL));
    c->tuning.small_bytes = (size_t)config_int(c->config, "small_bytes", 64 * 1024);
    c->tuning.segment_bytes = (size_t)config_int(c->config, "segment_bytes", 0);
    int staging = 0;
    plx__config_bool_in(c->config, "core", "cuda_staging", 0, &staging);
    c->cuda_staging = staging;
    const char *tuner = plx__config_get_in(c->config, "core", "tuner", NULL);
    char err[600];
    if (tuner && *tuner && plx__tuner_load(&c->tuning.tuner, tuner, err, sizeof err) != 0)
        return plx__err(PLX_ERR_CONFIG, "[core] tuner: %s", err);
    return 0;
}

static struct plx_comm *comm_alloc(const char *name)
{
    struct plx_comm *c = calloc(1, sizeof *c);
    if (!c || !(c->name = strdup(name))) {
        free(c);
        return NULL;
    }
    c->dh = &plx__diag_none;
    pthread_mutex_init(&c->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&c->cv, &ca);
    pthread_condattr_destroy(&ca);
    return c;
}

static void comm_free(struct plx_comm *c)
{
    plx__config_release(c->config);
    plx__store_release(c->store);
    plx__store_release(c->base_store);
    plx__scratch_free(&c->scratch);
    plx__scratch_free(&c->stage);
    plx__lowp_avg_drop(c);
    plx__preq_pool_free(c);
    pthread_mutex_destroy(&c->mu);
    pthread_cond_destroy(&c->cv);
    free(c->key_root);
    free(c->name);
    free(c);
}

/* Everything after the backend's comm exists: caps, p2p adapter, tuning. */
static int comm_finish_setup(struct plx_comm *c)
{
    c->caps = (struct plx_caps){.struct_size = sizeof c->caps};
    int rc = c->be->ops.get_caps(c->bc, &c->caps);
    if (rc != 0) {
        c->be->ops.comm_destroy(c->bc);
        plx__err_prefix("backend '%s': get_caps failed: ", c->be->name);
        return rc;
    }
    plx__caps_for_minor(c->be, &c->caps);
    plx__p2p_init(c);
    if ((rc = load_tuning(c)) != 0)
        c->be->ops.comm_destroy(c->bc);
    return rc;
}

/* The keys of this communicator in the job's store. A program that
 * destroys a communicator and creates the next one of the same name on the
 * same store (a restart loop, torch's destroy_process_group and
 * init_process_group) must not read the keys of the one before, which a
 * rank still leaving it may even be writing. Each rank counts its own joins
 * of the name in the store: the n-th communicator of a name is generation
 * n-1 on every rank, whatever order the ranks leave and join in, and also
 * for a rank whose process started anew. Generation 0 keeps the bare name. */
static int open_generation(struct plx_comm *c)
{
    char key[600];
    int64_t joins = 0;
    snprintf(key, sizeof key, "plexus-generation/%s/%d", c->name, c->rank);
    int rc = plx__store_add(c->base_store, key, 1, &joins);
    if (rc != 0) {
        plx__err_prefix("comm '%s': counting its generation in the store: ", c->name);
        return rc;
    }
    size_t n = strlen(c->name) + 32;
    if (!(c->key_root = malloc(n)))
        return plx__err(PLX_ERR_NOMEM, "plx_comm_init: out of memory");
    if (joins <= 1)
        snprintf(c->key_root, n, "%s", c->name);
    else
        snprintf(c->key_root, n, "%s@%lld", c->name, (long long)(joins - 1));
    return plx__store_prefixed(c->base_store, c->key_root, &c->store);
}

/* c's instance of its backend's services (ABI 1.5): log lines name c. */
const struct plx_host *plx__comm_instance(struct plx_comm *c)
{
    c->inst_ctx = (struct plx__host_ctx){.be = c->be, .comm = c->name, .config = c->config};
    plx__host_init(&c->inst, &c->inst_ctx);
    return &c->inst;
}

/* How long the next step of making c may wait for the others: what is
 * left of its one deadline, so that the steps together stay within it. */
static int64_t create_ms(const struct plx_comm *c)
{
    return c->create_deadline_ns ? plx__ms_left(c->create_deadline_ns) : c->timeout_ms;
}

/* Create the backend's communicator for c (rank/size/name/stores set). */
static int comm_create_backend(struct plx_comm *c)
{
    struct plx_comm_args args = {
        .struct_size = sizeof args,
        .rank = c->rank,
        .size = c->size,
        .local_rank = c->local_rank,
        .local_size = c->local_size,
        .name = c->name,
        .store = c->store,
        .timeout_ms = c->timeout_ms,
        .config = c->config,
        .host = plx__comm_instance(c),
        .create_timeout_ms = create_ms(c),
        .machine_ranks = c->machine_ranks,
    };
    int rc = plx__backend_comm_create(c->be, &args, &c->bc);
    if (rc != 0)
        return rc;
    return comm_finish_setup(c);
}

/* The process layers of the configuration, the log level, plugin discovery
 * and the choice of backend use process-wide tables: communicators created
 * by several threads at once take turns here (ThreadSanitizer caught the
 * drop-in table rewritten while another thread's discovery read it). The
 * options become *cfg, this communicator's own view, through which the
 * backend is chosen. INTRA+INTER also sets *intra (hier.c); *cfg reads
 * *be's section. */
static int init_process_wide(const struct plx_comm_options *opt, int place, struct plx__backend **be,
                             struct plx__backend **intra, struct plx_config **cfg, char *why, size_t wn)
{
    static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    static char applied_level[32];
    int rc;
    pthread_mutex_lock(&mu);
    if ((rc = plx__config_load()) == 0 && (rc = plx__loader_discover()) == 0 &&
        (rc = plx__config_open(opt, cfg)) == 0) {
        /* Threads of running communicators read the threshold unlocked:
         * write it only when it changes. */
        const char *level = plx__config_get_in(*cfg, "core", "log_level", NULL);
        if (level && strcmp(level, applied_level)) {
            plx__log_set_level(level);
            snprintf(applied_level, sizeof applied_level, "%s", level);
        }
        if ((rc = plx__hier_select(*cfg, opt->backend, place, be, intra, why, wn)) == 0) {
            plx__config_set_section(*cfg, (*be)->name);
            rc = plx__config_check_view(*cfg, (*be)->name);
            if (rc == 0 && *intra)
                rc = plx__config_check_view(*cfg, (*intra)->name);
        }
    }
    pthread_mutex_unlock(&mu);
    return rc;
}

/* A failure the store took part in: the backend's message says what it was
 * waiting for, the store's own reason where the store broke (and which rank
 * hosts it). Say both. */
static void add_store_cause(const struct plx_store *base)
{
    char why[512], msg[1024];
    if (!plx__store_lost(base, why, sizeof why) || strstr(plx_last_error(), why))
        return;
    snprintf(msg, sizeof msg, "%s", plx_last_error());
    plx__err(0, "%s (%s)", msg, why);
}

/* The refusals met while choosing c's backend, in order: what a job told
 * "no backend can serve it" needs to read. */
struct refusals {
    char text[1536];
    int n;
};

static void refusal_add(struct refusals *r, const char *backend, const char *why)
{
    size_t l = strlen(r->text), bl = strlen(backend);
    int named = !strncmp(why, backend, bl) && why[bl] == ':'; /* "shm: ..." already says whose */
    snprintf(r->text + l, sizeof r->text - l, "%s%s%s%s", l ? "; " : "", named ? "" : backend, named ? "" : ": ",
             why);
    r->n++;
}

/* Whether be can serve ranks launched as rv says: a backend whose ranks are
 * threads of one process (sim) cannot serve ranks that a launcher started
 * as processes (rank and size from its environment). Ranks the caller
 * numbered may be its threads. 1, or 0 with the reason in why. */
static int serves_launch(const struct plx__backend *be, int size, const struct plx__rendezvous *rv, char *why,
                         size_t n)
{
    if (size > 1 && (be->caps.flags & PLX_CAP_IN_PROCESS) && strcmp(rv->source, "options") &&
        strncmp(rv->url, "mem://", 6)) {
        snprintf(why, n, "runs every rank as a thread of one process (init mem://NAME), but this job's ranks are "
                 "processes (rank and size from %s)", rv->source);
        return 0;
    }
    return 1;
}

/* The chosen backend refused this communicator as unavailable here (shm
 * when the ranks span hosts; every rank learns the same through the store,
 * so all move on together), or cannot serve this launch: take the next
 * choice of the same spec that can, if the spec was auto or a list. 1 if
 * c->be changed (c->config re-pointed to its section); 0 with the error set
 * if not: with every refusal's reason where more than one backend refused. */
static int next_backend(const struct plx_comm_options *opt, struct plx_comm *c, struct plx__backend **intra,
                        const struct plx__rendezvous *rv, struct refusals *ref)
{
    char why[512], no[400];
    snprintf(why, sizeof why, "%s", plx_last_error());
    refusal_add(ref, c->be->name, why);
    struct plx__backend *next = NULL;
    struct plx_config *view = NULL;
    const struct plx__backend *after = c->be;
    for (;;) {
        if (plx__loader_select_placed(c->config, opt->backend, after, rv->place, &next, NULL, 0) != 0 || !next) {
            /* Those that never got to refuse, because their probe failed,
             * may be what the user meant to run on. */
            size_t had = strlen(ref->text);
            plx__loader_broken_in(c->config, opt->backend, ref->text, sizeof ref->text);
            if (ref->n > 1 || strlen(ref->text) > had)
                plx__err(PLX_ERR_UNAVAILABLE, "no backend can serve this job (%s)", ref->text);
            else
                plx__err(PLX_ERR_UNAVAILABLE, "%s", why);
            return 0;
        }
        if (serves_launch(next, c->size, rv, no, sizeof no))
            break;
        refusal_add(ref, next->name, no);
        after = next;
    }
    /* The communicator's options now read the next backend's section (the
     * refused backend kept nothing of the old view). */
    if (plx__config_derive(c->config, next->name, &view) != 0 || plx__config_check_view(view, next->name) != 0) {
        plx__config_release(view);
        return 0;
    }
    plx__config_release(c->config);
    c->config = view;
    plx__log(PLX_LOG_INFO, "core", "comm '%s': backend %s is unavailable here (%s); trying %s", c->name,
             c->be->name, why, next->name);
    /* A one-host backend refused a job that spans hosts, and the next one
     * spans hosts: compose them (hier.c). */
    if (!*intra && !(c->be->caps.flags & PLX_CAP_MULTI_NODE) && (next->caps.flags & PLX_CAP_MULTI_NODE))
        *intra = c->be;
    c->be = next;
    return 1;
}

/* plx_comm_init's probe while it waits in the store (store.h): a task of
 * this node's Slurm step that has exited (said in the store, for the
 * ranks on other nodes), or what another rank said there. */
static int init_probe(void *arg, char *why, size_t n)
{
    struct plx_comm *c = arg;
    /* The first rank to see one gone says so: its word names the cause,
     * where a later look would also find the ranks that failed for it. */
    void *v = NULL;
    size_t len = 0;
    if (c->store->ops->check(c->store, "plexus-gone") == 1 &&
        plx__store_get(c->store, "plexus-gone", &v, &len, 1000) == 0 && v) {
        snprintf(why, n, "%.*s", (int)len, (const char *)v);
        free(v);
        return 1;
    }
    free(v);
    v = NULL;
    long task = plx__liveness_local();
    if (task < 0)
        return 0;
    const char *node = getenv("SLURMD_NODENAME"), *me = getenv("SLURM_PROCID");
    int same = me && strtol(me, NULL, 10) == c->rank; /* ranks are the step's task ids */
    char r[32] = "";
    if (same)
        snprintf(r, sizeof r, "rank %ld, ", task);
    /* Two ranks may look at once, and a rank that failed for the first one
     * gone is itself gone a moment later: only the first claim publishes,
     * and a later one reads what it said. */
    int64_t claims = 0;
    if (plx__store_add(c->store, "plexus-gone-claims", 1, &claims) == 0 && claims > 1 &&
        plx__store_get(c->store, "plexus-gone", &v, &len, 1000) == 0 && v) {
        snprintf(why, n, "%.*s", (int)len, (const char *)v);
        free(v);
        return 1;
    }
    free(v);
    snprintf(why, n, "comm '%s': %sSlurm task %ld on %s, has exited before joining (seen by rank %d; srun "
             "without -K leaves the step running)", c->name, r, task, node ? node : "this node", c->rank);
    if (plx__store_set(c->store, "plexus-gone", why, strlen(why) + 1) != 0)
        plx__log(PLX_LOG_WARN, "core", "comm '%s': the others will not read why: %s", c->name, plx_last_error());
    return 1;
}

/* The job's store for c and its generation's keys, once (*done). */
static int open_store(struct plx_comm *c, const struct plx_comm_options *opt, struct plx__rendezvous *rv, int *done)
{
    if (*done)
        return 0;
    *done = 1;
    int rc = plx__rendezvous_store_open(c->config, opt, rv, c->rank, c->size, create_ms(c), &c->base_store);
    if (c->base_store) {
        /* Opened within init's deadline; later calls get the whole timeout. */
        plx__store_set_timeout(c->base_store, c->timeout_ms);
        plx__store_cap(c->base_store, c->create_deadline_ns);
    }
    if (rc == 0 && c->base_store)
        rc = open_generation(c);
    if (rc == 0 && c->store)
        plx__store_view_watch(c->store, init_probe, c);
    if (rc == 0)
        plx__log(PLX_LOG_INFO, "core", "comm '%s': rank %d of %d (from %s) on backend %s, store %s", c->name,
                 c->rank, c->size, rv->source, c->be->name, rv->url[0] ? rv->url : "none");
    return rc;
}

/* A failed init, once the store is open: the store lives in rank 0's
 * process, and a rank 0 that left at once would take from the other ranks
 * what they still had to read to learn the same (shm's host identities:
 * they would report a lost store instead of the reason). Every failing
 * rank counts itself; rank 0, if it hosts the store, stays until all have,
 * or 2 s at most, so that every rank fails with its own reason. */
static void fail_together(struct plx_comm *c, const struct plx__rendezvous *rv, int rc)
{
    const char *hosted = getenv("PLEXUS_STORE_HOSTED");
    if (!c->store || c->size < 2)
        return;
    char msg[2048];
    snprintf(msg, sizeof msg, "%s", plx_last_error());
    int64_t n = 0;
    int host = c->rank == 0 && !rv->client_only && !strncmp(rv->url, "tcp://", 6) && !(hosted && !strcmp(hosted, "1"));
    /* Past init's deadline too, however the store fares: 2 s at most for
     * the host's wait, 1 s for another rank's count (a store that answers
     * takes milliseconds). */
    plx__store_cap(c->base_store, plx__deadline_ms(host ? 2000 : 1000));
    if (plx__store_add(c->store, "plexus-init-failed", 1, &n) == 0) {
        if (n >= c->size)
            plx__store_set(c->store, "plexus-init-failed-all", "1", 1);
        else if (host)
            plx__store_wait(c->store, (const char *[]){"plexus-init-failed-all"}, 1,
                            c->timeout_ms < 2000 ? c->timeout_ms : 2000);
    }
    plx__err(rc, "%s", msg);
}

/* c's backend communicator: on c->be, or on the next choice of the spec
 * that can serve this launch where one cannot or refuses (the store opened
 * before the first backend that needs it, *store_open). */
static int create_with_fallback(struct plx_comm *c, const struct plx_comm_options *opt, struct plx__rendezvous *rv,
                                struct plx__backend **intra, int *store_open)
{
    /* A backend that cannot serve this launch: auto and lists move on, a
     * name fails here instead of inside the plugin. */
    struct refusals ref = {.n = 0};
    char no[400];
    while (!serves_launch(c->be, c->size, rv, no, sizeof no)) {
        plx__err(PLX_ERR_UNAVAILABLE, "backend %s %s", c->be->name, no);
        struct plx__backend *refused = c->be, *had = *intra;
        if (!next_backend(opt, c, intra, rv, &ref))
            return PLX_ERR_UNAVAILABLE;
        if (*intra == refused) /* not a one-host backend to compose with: it serves no process at all */
            *intra = had;
    }
    /* A backend that bootstraps itself gets the store after its communicator. */
    int rc;
    if (!(c->be->caps.flags & PLX_CAP_OWN_BOOTSTRAP) && (rc = open_store(c, opt, rv, store_open)) != 0)
        return rc;
    while ((rc = comm_create_backend(c)) == PLX_ERR_UNAVAILABLE && next_backend(opt, c, intra, rv, &ref))
        if (!(c->be->caps.flags & PLX_CAP_OWN_BOOTSTRAP) && (rc = open_store(c, opt, rv, store_open)) != 0)
            return rc;
    return rc;
}

PLX_API int plx_comm_init(const struct plx_comm_options *user_opt, struct plx_comm **out)
{
    struct plx_comm_options opt;
    struct plx__backend *be = NULL, *intra = NULL;
    struct plx__rendezvous rv;
    struct plx_comm *c = NULL;
    struct plx_config *cfg = NULL;
    int rc;

    uint64_t start_ns = plx__clock_ns(); /* init's deadline counts from here, discovery included */
    plx__err_clear();
    if (!out)
        return plx__err(PLX_ERR_INVALID_ARG, "plx_comm_init: out is NULL");
    *out = NULL;
    copy_options(user_opt, &opt);
    char why[400] = "";
    int64_t timeout_ms = 0;
    if ((rc = plx__rendezvous_resolve(&opt, &rv)) != 0 ||
        (rc = init_process_wide(&opt, rv.place, &be, &intra, &cfg, why, sizeof why)) != 0 ||
        (rc = options_timeout_ms(cfg, &opt, &timeout_ms)) != 0) {
        plx__config_release(cfg);
        return rc;
    }
    plx__log(PLX_LOG_DEBUG, "core", "comm '%s': backend %s: %s", opt.name ? opt.name : "world", be->name, why);
    if (!(c = comm_alloc(opt.name ? opt.name : "world"))) {
        plx__config_release(cfg);
        return plx__err(PLX_ERR_NOMEM, "plx_comm_init: out of memory");
    }
    c->config = cfg;
    c->be = be;
    c->rank = rv.rank;
    c->size = rv.size;
    c->local_rank = rv.local_rank;
    c->local_size = rv.local_size;
    c->timeout_ms = timeout_ms;
    /* One deadline for the whole init: the store, each backend tried, the
     * hierarchy's parts; each step waits only for what is left of it. */
    c->create_deadline_ns = plx__deadline_ms(c->timeout_ms);
    if (c->create_deadline_ns != PLX__NEVER)
        c->create_deadline_ns -= plx__clock_ns() - start_ns;

    int store_open = 0;
    rc = create_with_fallback(c, &opt, &rv, &intra, &store_open);
    be = c->be;
    if (rc != 0)
        goto fail;
    if ((rc = open_store(c, &opt, &rv, &store_open)) != 0 ||
        (rc = plx__diag_open(c, NULL, rv.url[0] ? rv.url : rv.source)) != 0) {
        c->be->ops.comm_destroy(c->bc);
        goto fail;
    }
    plx__family_join(c, NULL);
    if (c->store)
        plx__store_view_watch(c->store, NULL, NULL);
    /* Hosts of unequal size (known alike on every rank): stay flat. */
    if (intra && (rc = plx__hier_setup(c, intra)) == PLX_ERR_UNSUPPORTED) {
        plx__log(PLX_LOG_WARN, "core", "comm '%s': no hierarchy, every collective on %s: %s", c->name, be->name,
                 plx_last_error());
        rc = 0;
    }
    if (rc != 0) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", plx_last_error());
        plx_comm_destroy(c);
        return plx__err(rc, "plx_comm_init(rank %d of %d, backend %s+%s): %s", rv.rank, rv.size, intra->name,
                        be->name, msg);
    }
    c->create_deadline_ns = 0;
    plx__store_cap(c->base_store, 0);
    *out = c;
    return 0;

fail:
    add_store_cause(c->store ? c->store : c->base_store);
    plx__err_prefix("plx_comm_init(rank %d of %d, backend %s): ", rv.rank, rv.size, be->name);
    fail_together(c, &rv, rc);
    comm_free(c);
    return rc;
}

/* c's keys leave the store once every rank has destroyed c (store.h): a
 * job that makes communicators without end keeps its store bounded. A
 * broken communicator skips it: a rank that is gone would never count
 * itself out, and its store may be gone too. So does one on the caller's
 * own store (torch's): its keys are the caller's, as gloo's are, and the
 * store's host may close it as the others leave (torch's rank 0 ends its
 * store at its destroy, and the others' counting out would meet a closed
 * socket). What the caller reads in plx_last_error is left as it was. */
static void leave_store(struct plx_comm *c)
{
    if (!c->store || plx__store_is_callers(c->base_store) || __atomic_load_n(&c->failed, __ATOMIC_ACQUIRE) || __atomic_load_n(&c->aborted, __ATOMIC_ACQUIRE) ||
        __atomic_load_n(&c->revoked, __ATOMIC_ACQUIRE))
        return;
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", plx_last_error());
    if (plx__store_view_leave(c->store, c->rank, c->size, c->timeout_ms < 5000 ? c->timeout_ms : 5000) != 0)
        plx__log(PLX_LOG_DEBUG, "core", "comm '%s': its keys stay in the store: %s", c->name, plx_last_error());
    if (msg[0])
        plx__err(0, "%s", msg);
    else
        plx__err_clear();
}

PLX_API int plx_comm_destroy(struct plx_comm *c)
{
    if (!c)
        return 0;
    plx__hier_destroy(c);
    plx__family_leave(c);
    plx__executor_stop(c);
    plx__prepared_drop_all(c);
    plx__mem_release_all(c);
    int rc = c->be->ops.comm_destroy(c->bc);
    plx__diag_close(c);
    if (rc == 0)
        leave_store(c);
    comm_free(c);
    return rc;
}

PLX_API int plx_comm_abort(struct plx_comm *c)
{
    if (!c)
        return plx__err(PLX_ERR_INVALID_ARG, "plx_comm_abort: comm is NULL");
    __atomic_store_n(&c->aborted, 1, __ATOMIC_RELEASE);
    int rc = 0;
    if (c->be->ops.comm_abort)
        rc = c->be->ops.comm_abort(c->bc);
    plx__hier_abort(c);
    pthread_mutex_lock(&c->mu);
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
    return rc;
}

PLX_API int plx_comm_revoke(struct plx_comm *c)
{
    plx__err_clear();
    if (!c)
        return plx__err(PLX_ERR_INVALID_ARG, "plx_comm_revoke: comm is NULL");
    if (!c->be->ops.comm_revoke)
        return plx__err(PLX_ERR_UNSUPPORTED, "plx_comm_revoke on '%s': backend %s cannot revoke a communicator",
                        c->name, c->be->name);
    /* Its work runs on the intra/cross children, which the base's revoke
     * would not reach: those must revoke too. */
    if (c->hier && (!plx__hier_intra_backend(c)->ops.comm_revoke))
        return plx__err(PLX_ERR_UNSUPPORTED, "plx_comm_revoke on '%s': its hierarchy runs inside hosts on backend "
                        "%s, which cannot revoke a communicator", c->name, plx__hier_intra_backend(c)->name);
    __atomic_store_n(&c->revoked, 1, __ATOMIC_RELEASE);
    int rc = c->be->ops.comm_revoke(c->bc);
    if (rc == PLX_ERR_UNSUPPORTED) /* the backend cannot here (mpi without ULFM): comm goes on as it was */
        __atomic_store_n(&c->revoked, 0, __ATOMIC_RELEASE);
    if (rc == 0 && c->hier)
        rc = plx__hier_revoke(c);
    pthread_mutex_lock(&c->mu);
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
    return rc;
}

struct split_entry {
    int32_t color, key, rank, pad;
};

static int cmp_split(const void *a, const void *b)
{
    const struct split_entry *x = a, *y = b;
    if (x->key != y->key)
        return x->key < y->key ? -1 : 1;
    return x->rank < y->rank ? -1 : x->rank > y->rank;
}

/* Where this rank lands in its color: every rank learns every (color,
 * key), since both split paths need the child's rank and size; ranks of a
 * color order by key, then by parent rank. */
static int split_place(struct plx_comm *c, int color, int key, int *new_rank, int *size)
{
    struct split_entry mine = {color, key, c->rank, 0};
    struct split_entry *all = calloc((size_t)c->size, sizeof *all);
    if (!all)
        return plx__err(PLX_ERR_NOMEM, "plx_comm_split: out of memory");
    int rc = plx_allgather(c, &mine, all, 4, PLX_I32);
    if (rc != 0) {
        free(all);
        plx__err_prefix("plx_comm_split(rank %d): ", c->rank);
        return rc;
    }
    int n = 0;
    for (int i = 0; i < c->size; i++)
        if (all[i].color == color)
            all[n++] = all[i];
    qsort(all, (size_t)n, sizeof *all, cmp_split);
    for (int i = 0; i < n; i++)
        if (all[i].rank == c->rank)
            *new_rank = i;
    *size = n;
    free(all);
    return 0;
}

/* The child's store: the parent's, under the parent's keys and the split's
 * step, so a split of the next generation never meets this one's. */
static int split_store(const struct plx_comm *c, struct plx_comm *child, const char *step)
{
    plx__store_retain(c->base_store);
    child->base_store = c->base_store;
    char root[512];
    plx__child_key_root(root, sizeof root, c->key_root, step);
    if (!(child->key_root = strdup(root)))
        return plx__err(PLX_ERR_NOMEM, "plx_comm_split: out of memory");
    return plx__store_prefixed(c->base_store, child->key_root, &child->store);
}

PLX_API int plx_comm_split(struct plx_comm *c, int color, int key, struct plx_comm **out)
{
    return plx__comm_split_on(c, color, key, c ? c->be : NULL, out);
}

int plx__comm_split_on(struct plx_comm *c, int color, int key, struct plx__backend *be, struct plx_comm **out)
{
    if (!c || !out)
        return plx__err(PLX_ERR_INVALID_ARG, "plx_comm_split: comm or out is NULL");
    *out = NULL;
    if (color < 0 && color != PLX_UNDEFINED)
        return plx__err(PLX_ERR_INVALID_ARG, "plx_comm_split: color %d is negative (use PLX_UNDEFINED)", color);

    int new_rank = -1, n = 0;
    int rc = split_place(c, color, key, &new_rank, &n);
    if (rc != 0)
        return rc;
    uint64_t seq = c->split_seq++;

    char name[512], step[64];
    snprintf(step, sizeof step, "/split%llu.%d", (unsigned long long)seq, color);
    plx__child_name(name, sizeof name, c->name, step);
    int native = be == c->be && (c->caps.flags & PLX_CAP_SPLIT) && c->be->ops.comm_split;
    if (color == PLX_UNDEFINED) {
        if (native) /* the backend's split is collective over the parent */
            return c->be->ops.comm_split(c->bc, -1, key, NULL, &(void *){NULL});
        return 0;
    }

    struct plx_comm *child = comm_alloc(name);
    if (!child) {
        rc = plx__err(PLX_ERR_NOMEM, "plx_comm_split: out of memory");
        goto fail;
    }
    child->be = be;
    /* A child on another backend (hier.c's intra child) reads that
     * backend's section, with the parent's options. */
    if (be == c->be)
        child->config = plx__config_retain(c->config);
    else if ((rc = plx__config_derive(c->config, be->name, &child->config)) != 0 ||
             (rc = plx__config_check_view(child->config, be->name)) != 0)
        goto fail;
    child->rank = new_rank;
    child->size = n;
    child->local_rank = new_rank; /* refined by a device mesh, not known here */
    child->local_size = n;
    child->machine_ranks = c->machine_ranks; /* its ranks share the cores the parent's do */
    child->timeout_ms = c->timeout_ms;
    child->create_deadline_ns = c->create_deadline_ns; /* inside init (hier.c): init's deadline */
    if (c->base_store && (rc = split_store(c, child, step)) != 0)
        goto fail;
    /* The child inherits the parent's options (child->config): the backend reads them now. */
    if (native) {
        struct plx_comm_args args = {
            .struct_size = sizeof args, .rank = new_rank, .size = n, .local_rank = new_rank,
            .local_size = n, .name = name, .store = child->store, .timeout_ms = c->timeout_ms,
            .config = child->config, .host = plx__comm_instance(child), .create_timeout_ms = create_ms(child),
            .machine_ranks = child->machine_ranks,
        };
        rc = plx__backend_comm_split(c->be, c->bc, color, key, &args, &child->bc);
        if (rc == 0)
            rc = comm_finish_setup(child);
    } else {
        rc = comm_create_backend(child);
    }
    child->create_deadline_ns = 0;
    if (rc == 0 && (rc = plx__diag_open(child, c, NULL)) != 0)
        child->be->ops.comm_destroy(child->bc);
    if (rc != 0)
        goto fail;
    plx__family_join(child, c);
    *out = child;
    return 0;
fail:
    add_store_cause(c->base_store);
    plx__err_prefix("plx_comm_split(rank %d, color %d): ", c->rank, color);
    /* The split is collective over the parent: the other ranks may or may
     * not hold a child now, so the parent's issue order is no longer shared. */
    char msg[sizeof c->failed_msg];
    snprintf(msg, sizeof msg, "%s", plx_last_error());
    plx__comm_fail(c, rc, msg, sizeof msg);
    if (child)
        comm_free(child);
    return rc;
}

PLX_API int plx_comm_rank(const struct plx_comm *c)
{
    return c ? c->rank : PLX_ERR_INVALID_ARG;
}

PLX_API int plx_comm_size(const struct plx_comm *c)
{
    return c ? c->size : PLX_ERR_INVALID_ARG;
}

PLX_API int plx_comm_local_rank(const struct plx_comm *c)
{
    return c ? c->local_rank : PLX_ERR_INVALID_ARG;
}

PLX_API int plx_comm_local_size(const struct plx_comm *c)
{
    return c ? c->local_size : PLX_ERR_INVALID_ARG;
}

PLX_API const char *plx_comm_backend(const struct plx_comm *c)
{
    if (!c)
        return NULL;
    const char *composed = plx__hier_name(c);
    return composed ? composed : c->be->name;
}

PLX_API const char *plx_comm_name(const struct plx_comm *c)
{
    return c ? c->name : NULL;
}

PLX_API int plx_finalize(void)
{
    static int finalized;
    if (__atomic_exchange_n(&finalized, 1, __ATOMIC_ACQ_REL))
        return 0;
    for (size_t i = 0; i < plx__loader_count(); i++) {
        struct plx__backend *b = plx__loader_at(i);
        if (b->ops.finalize)
            b->ops.finalize();
    }
    return 0;
}

/* A communicator built anew for shrink.c and grow.c: the ranks of parent's
 * job that take part meet under parent's keys + suffix in its store, on its
 * backend and options, without the old communicator's connections (which
 * may be broken). parent NULL: opt's store, config and backend (a newcomer
 * that joins through the store); then key_root is the whole prefix. The
 * backend's rendezvous waits at most create_ms; the new communicator keeps
 * the parent's (or opt's) operation timeout. */
int plx__comm_rebuild(struct plx_comm *parent, const struct plx__rebuild *rb, struct plx_comm **out)
{
    *out = NULL;
    struct plx_comm *c = comm_alloc(rb->name);
    if (!c)
        return plx__err(PLX_ERR_NOMEM, "out of memory");
    c->be = rb->be;
    c->config = plx__config_retain(rb->config);
    c->rank = rb->rank;
    c->size = rb->size;
    c->local_rank = rb->rank; /* as for a split: a device mesh would refine it */
    c->local_size = rb->size;
    c->timeout_ms = rb->timeout_ms;
    plx__store_retain(rb->base_store);
    c->base_store = rb->base_store;
    int rc;
    if (!(c->key_root = strdup(rb->key_root))) {
        rc = plx__err(PLX_ERR_NOMEM, "out of memory");
        goto fail;
    }
    if ((rc = plx__store_prefixed(c->base_store, c->key_root, &c->store)) != 0)
        goto fail;
    c->create_deadline_ns = plx__deadline_ms(rb->create_ms);
    rc = comm_create_backend(c);
    c->create_deadline_ns = 0;
    if (rc == 0 && (rc = plx__diag_open(c, parent, NULL)) != 0)
        c->be->ops.comm_destroy(c->bc);
    if (rc != 0)
        goto fail;
    plx__family_join(c, NULL);
    *out = c;
    return 0;
fail:
    add_store_cause(rb->base_store);
    comm_free(c);
    return rc;
}

/* shrink.c's successor built by the backend itself (ABI 1.8 comm_shrink)
 * out of parent's backend communicator: rb as for plx__comm_rebuild,
 * except that without a store (rb->base_store NULL, agreed 0) the backend
 * finds the survivors and writes them into alive, and c's rank and size
 * follow from that. */
int plx__comm_shrink_native(struct plx_comm *parent, const struct plx__rebuild *rb, unsigned char *alive,
                            int agreed, struct plx_comm **out)
{
    *out = NULL;
    struct plx_comm *c = comm_alloc(rb->name);
    if (!c)
        return plx__err(PLX_ERR_NOMEM, "out of memory");
    c->be = rb->be;
    c->config = plx__config_retain(rb->config);
    c->timeout_ms = rb->timeout_ms;
    int rc = 0;
    if (rb->base_store) {
        plx__store_retain(rb->base_store);
        c->base_store = rb->base_store;
        if (!(c->key_root = strdup(rb->key_root)))
            rc = plx__err(PLX_ERR_NOMEM, "out of memory");
        else
            rc = plx__store_prefixed(c->base_store, c->key_root, &c->store);
    }
    if (rc != 0)
        goto fail;
    struct plx_comm_args args = {
        .struct_size = sizeof args, .rank = agreed ? rb->rank : -1, .size = agreed ? rb->size : -1,
        .local_rank = agreed ? rb->rank : -1, .local_size = agreed ? rb->size : -1, .name = c->name,
        .store = c->store, .timeout_ms = rb->timeout_ms, .config = c->config, .host = plx__comm_instance(c),
        .create_timeout_ms = rb->create_ms,
    };
    if ((rc = plx__backend_comm_shrink(parent->be, parent->bc, alive, agreed, &args, &c->bc)) != 0)
        goto fail;
    for (int i = 0; i < parent->size; i++) {
        c->rank += i < parent->rank && alive[i];
        c->size += alive[i] != 0;
    }
    c->local_rank = c->rank; /* as for a split: a device mesh would refine it */
    c->local_size = c->size;
    if ((rc = comm_finish_setup(c)) != 0)
        goto fail; /* comm_finish_setup destroyed the backend's communicator */
    if ((rc = plx__diag_open(c, parent, NULL)) != 0) {
        c->be->ops.comm_destroy(c->bc);
        goto fail;
    }
    plx__family_join(c, NULL);
    *out = c;
    return 0;
fail:
    if (rb->base_store)
        add_store_cause(rb->base_store);
    comm_free(c);
    return rc;
}

/* plx_comm_join's start (grow.c): what plx_comm_init does before the
 * backend, for a process that joins a running job: its options, backend
 * and the job's store, as a client of the store (the job's rank 0, or a
 * launcher, hosts it). */
int plx__comm_open_job(const struct plx_comm_options *user_opt, struct plx__job *job)
{
    struct plx_comm_options opt;
    struct plx__backend *intra = NULL;
    struct plx__rendezvous rv;
    copy_options(user_opt, &opt);
    memset(job, 0, sizeof *job);
    if (opt.rank < 0)
        opt.rank = 1; /* no rank yet: anything but the store's host */
    if (opt.size < 0)
        opt.size = 2;
    char why[400];
    int rc = plx__rendezvous_resolve(&opt, &rv);
    if (rc == 0)
        rc = init_process_wide(&opt, rv.place, &job->be, &intra, &job->config, why, sizeof why);
    if (rc == 0 && intra)
        rc = plx__err(PLX_ERR_UNSUPPORTED, "plx_comm_join: a hierarchical backend (%s+%s) cannot grow",
                      intra->name, job->be->name);
    if (rc == 0 && !rv.url[0] && !opt.store)
        rc = plx__err(PLX_ERR_UNSUPPORTED, "plx_comm_join: backend %s has no store to meet the job in",
                      job->be->name);
    if (rc == 0)
        rc = options_timeout_ms(job->config, &opt, &job->timeout_ms);
    if (rc == 0) {
        rv.client_only = 1;
        rc = plx__rendezvous_store_open(job->config, &opt, &rv, -1, rv.size, job->timeout_ms, &job->base_store);
    }
    snprintf(job->name, sizeof job->name, "%s", opt.name ? opt.name : "world");
    if (rc != 0) {
        plx__config_release(job->config);
        job->config = NULL;
    }
    return rc;
}
