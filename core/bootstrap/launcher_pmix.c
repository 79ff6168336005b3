/* launcher_pmix.c - the rendezvous of a job whose launcher runs a PMIx
 * server (Open MPI's mpirun, srun --mpi=pmix, prterun): rank 0 hosts the
 * store on a port the kernel picks and puts its address in the job's
 * key-value space; after a fence of the whole job every rank reads it.
 * libpmix is loaded at run time, so libplexus never depends on it; only
 * its header's types are compiled in. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bootstrap.h"
#include "error.h"

#if PLX_HAVE_PMIX_H
#include <pmix.h>

/* The keys rank 0 publishes, under its own PMIx name: the store's address
 * and the job secret ("" when the user set one), which the job's key-value
 * space keeps from anyone outside the job. */
#define STORE_KEY "plexus.store"
#define SECRET_KEY "plexus.secret"

struct pmix_api {
    pmix_status_t (*init)(pmix_proc_t *proc, pmix_info_t info[], size_t ninfo);
    pmix_status_t (*finalize)(const pmix_info_t info[], size_t ninfo);
    pmix_status_t (*put)(pmix_scope_t scope, const pmix_key_t key, pmix_value_t *val);
    pmix_status_t (*commit)(void);
    pmix_status_t (*fence_nb)(const pmix_proc_t procs[], size_t nprocs, const pmix_info_t info[], size_t ninfo,
                              pmix_op_cbfunc_t cbfunc, void *cbdata);
    pmix_status_t (*get)(const pmix_proc_t *proc, const pmix_key_t key, const pmix_info_t info[], size_t ninfo,
                         pmix_value_t **val);
    pmix_status_t (*get_nb)(const pmix_proc_t *proc, const pmix_key_t key, const pmix_info_t info[], size_t ninfo,
                            pmix_value_cbfunc_t cbfunc, void *cbdata);
    const char *(*error_string)(pmix_status_t status);
};

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static struct pmix_api api;
static char load_error[200];

static void load(void)
{
    /* Debian's libpmix2 puts the soname on the default path; other
     * installs name the library in PLEXUS_PMIX_LIBRARY. */
    const char *named = getenv("PLEXUS_PMIX_LIBRARY");
    void *h = dlopen(named && *named ? named : "libpmix.so.2", RTLD_NOW | RTLD_LOCAL);
    if (!h && !(named && *named))
        h = dlopen("libpmix.so", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(load_error, sizeof load_error, "libpmix cannot be loaded (%.150s)", dlerror());
        return;
    }
    struct {
        const char *name;
        void **at;
    } want[] = {
        {"PMIx_Init", (void **)&api.init},         {"PMIx_Finalize", (void **)&api.finalize},
        {"PMIx_Put", (void **)&api.put},           {"PMIx_Commit", (void **)&api.commit},
        {"PMIx_Fence_nb", (void **)&api.fence_nb}, {"PMIx_Get", (void **)&api.get},
        {"PMIx_Get_nb", (void **)&api.get_nb},     {"PMIx_Error_string", (void **)&api.error_string},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        if (!(*want[i].at = dlsym(h, want[i].name))) {
            snprintf(load_error, sizeof load_error, "libpmix lacks %s", want[i].name);
            memset(&api, 0, sizeof api);
            return; /* the handle stays: a library may not be unloaded under a running thread */
        }
    }
}

static const char *loaded(void)
{
    pthread_once(&load_once, load);
    return api.init ? NULL : load_error;
}

static const char *status_text(pmix_status_t st)
{
    const char *s = api.error_string ? api.error_string(st) : NULL;
    return s ? s : "unknown PMIx status";
}

/* One nonblocking PMIx call's outcome, waited for with plexus's timeout
 * (a launcher's server may not honour PMIx's own). Heap-owned: a call that
 * timed out may still call back later, into this and nothing else. */
struct pending {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int done, abandoned;
    pmix_status_t status;
    char value[512];
};

static struct pending *pending_new(void)
{
    struct pending *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    pthread_mutex_init(&p->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&p->cv, &ca);
    pthread_condattr_destroy(&ca);
    return p;
}

static void pending_free(struct pending *p)
{
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->mu);
    free(p);
}

/* Marks p done; frees it if its waiter already gave up. */
static void pending_finish(struct pending *p, pmix_status_t st, const char *value)
{
    pthread_mutex_lock(&p->mu);
    p->status = st;
    if (value)
        snprintf(p->value, sizeof p->value, "%s", value);
    p->done = 1;
    int orphan = p->abandoned;
    pthread_cond_signal(&p->cv);
    pthread_mutex_unlock(&p->mu);
    if (orphan)
        pending_free(p);
}

static void fence_done(pmix_status_t st, void *cbdata)
{
    pending_finish(cbdata, st, NULL);
}

static void get_done(pmix_status_t st, pmix_value_t *kv, void *cbdata)
{
    const char *v = st == PMIX_SUCCESS && kv && kv->type == PMIX_STRING ? kv->data.string : NULL;
    pending_finish(cbdata, st == PMIX_SUCCESS && !v ? PMIX_ERR_TYPE_MISMATCH : st, v ? v : "");
}

/* 0 when p finished within timeout_ms (< 0: none), else 1 and p is left
 * to its callback. */
static int pending_wait(struct pending *p, int64_t timeout_ms)
{
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    if (timeout_ms >= 0) {
        until.tv_sec += timeout_ms / 1000;
        until.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
    }
    pthread_mutex_lock(&p->mu);
    while (!p->done) {
        if (timeout_ms < 0)
            pthread_cond_wait(&p->cv, &p->mu);
        else if (pthread_cond_timedwait(&p->cv, &p->mu, &until) != 0 && !p->done) {
            p->abandoned = 1;
            pthread_mutex_unlock(&p->mu);
            return 1;
        }
    }
    pthread_mutex_unlock(&p->mu);
    return 0;
}

static void info_int(pmix_info_t *i, const char *key, int v)
{
    memset(i, 0, sizeof *i);
    snprintf(i->key, sizeof i->key, "%s", key);
    i->value.type = PMIX_INT;
    i->value.data.integer = v;
}

static void info_bool(pmix_info_t *i, const char *key, int v)
{
    memset(i, 0, sizeof *i);
    snprintf(i->key, sizeof i->key, "%s", key);
    i->value.type = PMIX_BOOL;
    i->value.data.flag = v != 0;
}

/* The job's size from the launcher, or 0 if it does not say. */
static unsigned job_size(const pmix_proc_t *me)
{
    pmix_proc_t job = *me;
    pmix_value_t *v = NULL;
    unsigned n = 0;
    job.rank = PMIX_RANK_WILDCARD;
    if (api.get(&job, PMIX_JOB_SIZE, NULL, 0, &v) == PMIX_SUCCESS && v) {
        if (v->type == PMIX_UINT32)
            n = v->data.uint32;
        free(v); /* a number: nothing inside to free */
    }
    return n;
}

/* Rank 0's part: host the store where the others can reach it, publish. */
static int publish(const struct plx_config *cfg, const char *nspace, char *url, size_t n)
{
    /* The secret first: the store serves with it from its first client on. */
    char secret[80];
    int rc = plx__launcher_secret_make(secret, sizeof secret);
    if (rc == 0)
        rc = plx__launcher_host_store(cfg, "PMIx", url, n);
    if (rc != 0)
        return rc;
    pmix_value_t v = {.type = PMIX_STRING}, sv = {.type = PMIX_STRING};
    v.data.string = url;
    sv.data.string = secret;
    pmix_status_t st = api.put(PMIX_GLOBAL, STORE_KEY, &v);
    if (st == PMIX_SUCCESS)
        st = api.put(PMIX_GLOBAL, SECRET_KEY, &sv);
    if (st == PMIX_SUCCESS)
        st = api.commit();
    if (st != PMIX_SUCCESS)
        return plx__err(PLX_ERR_SYSTEM, "PMIx bootstrap (namespace %s): rank 0 cannot publish the store address: %s",
                        nspace, status_text(st));
    return 0;
}

/* PMIx stays initialised until the process ends: an MPI library in this
 * process (the mpi backend) initialises the same libpmix after us, and
 * Open MPI's server fails a client that finalised and then initialises
 * again. With the library's reference count, whoever finalises last ends
 * the session; a launcher counts a process that exits without it as failed. */
static pid_t init_pid;
static int stuck;

static void finalize_now(void)
{
    if (getpid() == init_pid && !stuck) /* a forked child's exit is not ours to report */
        api.finalize(NULL, 0);
}

static void finalize_at_exit(void)
{
    if (init_pid == 0) {
        init_pid = getpid();
        atexit(finalize_now);
    }
}

/* Rank 0's string under key into out: 0 with PMIx's status in *st, 1 when
 * it did not end within timeout_ms (the call is left to its callback), -1
 * out of memory. */
static int get_root(const pmix_proc_t *me, const char *key, const pmix_info_t *info, int64_t timeout_ms, char *out,
                    size_t n, pmix_status_t *st)
{
    struct pending *p = pending_new();
    if (!p)
        return -1;
    pmix_proc_t root = *me;
    root.rank = 0;
    *st = api.get_nb(&root, key, info, 1, get_done, p);
    if (*st == PMIX_SUCCESS) {
        if (pending_wait(p, timeout_ms) != 0)
            return 1;
        *st = p->status;
        if (*st == PMIX_SUCCESS)
            snprintf(out, n, "%s", p->value);
    }
    pending_free(p);
    return 0;
}

static int exchange(const struct plx_config *v, const struct plx__rendezvous *rv, int64_t timeout_ms, char *url,
                    size_t n)
{
    /* Initialised once: a retry after a failed exchange reuses it, so the
     * one finalize at exit balances it. */
    static pmix_proc_t me;
    pmix_status_t st;
    if (!init_pid) {
        memset(&me, 0, sizeof me);
        if ((st = api.init(&me, NULL, 0)) != PMIX_SUCCESS)
            return plx__err(PLX_ERR_SYSTEM, "PMIx bootstrap: PMIx_Init failed (%s): is the launcher's PMIx server "
                            "still there?", status_text(st));
    }
    if (stuck)
        return plx__err(PLX_ERR_TIMEOUT, "PMIx bootstrap (namespace %s, rank %u): an earlier exchange timed out "
                        "and PMIx is still in it", me.nspace, me.rank);
    int rc = 0;
    unsigned size = job_size(&me);
    if (me.rank != (pmix_rank_t)rv->rank || (size && size != (unsigned)rv->size)) {
        rc = plx__err(PLX_ERR_INVALID_ARG, "PMIx bootstrap: the launcher's PMIx server says rank %u of %u in "
                      "namespace %s, but this is rank %d of %d (from %s)", me.rank, size, me.nspace, rv->rank,
                      rv->size, rv->source);
        goto out;
    }
    if (rv->rank == 0 && (rc = publish(v, me.nspace, url, n)) != 0)
        goto out;
    /* Every rank of the job, then rank 0's key. The launcher's own timeout
     * is asked for too, so its fence ends when ours does. */
    int secs = timeout_ms < 0 ? 0 : (int)((timeout_ms + 999) / 1000);
    pmix_info_t info[2];
    info_bool(&info[0], PMIX_COLLECT_DATA, 1);
    info_int(&info[1], PMIX_TIMEOUT, secs);
    const char *step = "fence of the whole job";
    struct pending *p = pending_new();
    if (!p) {
        rc = plx__err(PLX_ERR_NOMEM, "PMIx bootstrap: out of memory");
        goto out;
    }
    st = api.fence_nb(NULL, 0, info, 2, fence_done, p);
    if (st == PMIX_SUCCESS && pending_wait(p, timeout_ms) == 0)
        st = p->status;
    else if (st == PMIX_SUCCESS)
        goto timed_out;
    pending_free(p);
    if (st == PMIX_SUCCESS && rv->rank != 0) {
        char secret[80] = "";
        step = "read of rank 0's store address";
        int w = get_root(&me, STORE_KEY, info + 1, timeout_ms, url, n, &st);
        if (w == 0 && st == PMIX_SUCCESS && strncmp(url, "tcp://", 6))
            st = PMIX_ERR_BAD_PARAM;
        if (w == 0 && st == PMIX_SUCCESS) {
            step = "read of rank 0's job secret";
            w = get_root(&me, SECRET_KEY, info + 1, timeout_ms, secret, sizeof secret, &st);
        }
        if (w > 0)
            goto timed_out;
        if (w < 0 || (st == PMIX_SUCCESS && (rc = plx__launcher_secret_adopt(secret)) != 0)) {
            rc = rc ? rc : plx__err(PLX_ERR_NOMEM, "PMIx bootstrap: out of memory");
            goto out;
        }
    }
    if (st != PMIX_SUCCESS)
        rc = plx__err(PLX_ERR_SYSTEM, "PMIx bootstrap (namespace %s, rank %u): the %s failed: %s", me.nspace,
                      me.rank, step, status_text(st));
out:
    finalize_at_exit();
    return rc;
timed_out:
    /* The pending call still runs: no finalize under it. */
    finalize_at_exit();
    stuck = 1;
    return plx__err(PLX_ERR_TIMEOUT, "PMIx bootstrap (namespace %s, rank %u): the %s did not end within %lld ms: "
                    "a rank of the job did not reach plx_comm_init, or the launcher's PMIx server stalled",
                    me.nspace, me.rank, step, (long long)timeout_ms);
}

static pthread_mutex_t cache_mu = PTHREAD_MUTEX_INITIALIZER;
static char cached_url[512];

int plx__pmix_store_url(const struct plx_config *v, const struct plx__rendezvous *rv, int64_t timeout_ms, char *url,
                        size_t n)
{
    const char *why = loaded();
    if (why)
        return plx__err(PLX_ERR_UNAVAILABLE, "PMIx bootstrap: %s", why);
    /* One exchange per process: rank 0's server outlives communicators, and
     * a later communicator may be made by fewer than the job's ranks, which
     * a fence of the job could not serve. */
    pthread_mutex_lock(&cache_mu);
    int rc = 0;
    if (!cached_url[0])
        rc = exchange(v, rv, timeout_ms, cached_url, sizeof cached_url);
    if (rc == 0)
        snprintf(url, n, "%s", cached_url);
    else
        cached_url[0] = '\0';
    pthread_mutex_unlock(&cache_mu);
    return rc;
}
#else
/* Built without PMIx's header: a pmix:// rendezvous is refused, saying why. */
int plx__pmix_store_url(const struct plx_config *v, const struct plx__rendezvous *rv, int64_t timeout_ms, char *url,
                        size_t n)
{
    (void)v;
    (void)rv;
    (void)timeout_ms;
    (void)url;
    (void)n;
    return plx__err(PLX_ERR_UNAVAILABLE, "PMIx bootstrap: plexus was built without PMIx's header (libpmix-dev)");
}
#endif

int plx__rendezvous_pmix(struct plx__rendezvous *r)
{
    const char *nspace = getenv("PMIX_NAMESPACE");
    long rank;
    if (!nspace || !*nspace || plx__env_uint("PMIX_RANK", 999999999, &rank)) {
        snprintf(r->why, sizeof r->why, "no PMIx server started us (PMIX_NAMESPACE, PMIX_RANK unset)");
        return 0;
    }
    /* A launcher started inside another's job (mpirun in srun --mpi=pmix)
     * may pass the outer job's variables on: they only describe us if they
     * agree. */
    if (rank != r->rank) {
        snprintf(r->why, sizeof r->why, "PMIx's PMIX_RANK=%ld is not this rank %d (%s started it)", rank, r->rank,
                 r->source);
        return 0;
    }
#if PLX_HAVE_PMIX_H
    const char *why = loaded();
    if (why) {
        snprintf(r->why, sizeof r->why, "a PMIx server started us (namespace %.64s) but %s", nspace, why);
        return 0;
    }
    snprintf(r->url, sizeof r->url, "pmix://%s", nspace);
    snprintf(r->why, sizeof r->why, "a PMIx server started us (namespace %.64s): rank 0 hosts the store and "
             "publishes its address through PMIx", nspace);
    return 1;
#else
    snprintf(r->why, sizeof r->why, "a PMIx server started us (namespace %.64s) but plexus was built without "
             "PMIx's header (libpmix-dev)", nspace);
    return 0;
#endif
}
