/* plugin.c - the UCC backend, loaded at run time: libucc.so.1 through our
 * own declarations (ucc_api.h), ucc_init_version (ucc_init is inline), an
 * out-of-band allgather built on the core's store, and ucc_context_progress
 * in every create, test and destroy loop. Each communicator gets its own
 * context and team, created one at a time, so a team always matches one
 * communicator and its OOB lives exactly as long as it. */
#include <dirent.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "plexus/backend.h"
#include "plexus/plugin.h"

#include "find.h"
#include "ucc_api.h"

/* The entry point's services: probe runs before any communicator exists.
 * A communicator reaches the core through its own instance (comm_create). */
static const struct plx_host *entry_host;

static struct {
#define UCC_FIELD(ret, name, args) ret(*name) args;
    PLX_UCC_FUNCS(UCC_FIELD)
#undef UCC_FIELD
} u;


static const char *serr(ucc_status_t s)
{
    return u.ucc_status_string ? u.ucc_status_string(s) : "UCC error";
}

/* ---- loading and probe ---------------------------------------------------- */

static int load_state = -1;
static char load_reason[512];
static ucc_lib_h lib;
static pthread_mutex_t lib_mu = PTHREAD_MUTEX_INITIALIZER; /* also serializes context/team creation */

static void list_tls(char *out, size_t n, const char *lib_file);

static int load(char *reason, size_t len)
{
    pthread_mutex_lock(&lib_mu);
    if (load_state < 0) {
        const char *dir = plx_plugin_config_str(entry_host, NULL, "library_path");
        char path[1024], where[600] = "the system's library path";
        void *h = dlopen("libucc.so.1", RTLD_NOW | RTLD_LOCAL);
        if (!h && dir && *dir) {
            snprintf(path, sizeof path, "%s/libucc.so.1", dir);
            snprintf(where + strlen(where), sizeof where - strlen(where), ", %.500s", dir);
            h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        }
        load_state = PLX_PROBE_UNAVAILABLE;
        if (!h) {
            snprintf(load_reason, sizeof load_reason, "libucc.so.1 not found (searched %s)", where);
        } else {
            const char *missing = NULL;
#define UCC_SYM(ret, name, args) \
    if (!(u.name = (ret(*) args)dlsym(h, #name)) && !missing) \
        missing = #name;
            PLX_UCC_FUNCS(UCC_SYM)
#undef UCC_SYM
            if (missing) {
                snprintf(load_reason, sizeof load_reason, "libucc.so.1 lacks %s (not UCC 1.x?)", missing);
                load_state = PLX_PROBE_BROKEN;
            } else {
                const char *v = u.ucc_get_version_string();
                if (!v || strncmp(v, "1.", 2)) {
                    snprintf(load_reason, sizeof load_reason, "UCC %s is not a 1.x release", v ? v : "?");
                } else {
                    snprintf(load_reason, sizeof load_reason, "UCC %s", v);
                    Dl_info info;
                    if (dladdr((void *)u.ucc_get_version_string, &info) && info.dli_fname)
                        list_tls(load_reason, sizeof load_reason, info.dli_fname);
                    load_state = PLX_PROBE_USABLE;
                }
            }
        }
    }
    int st = load_state;
    size_t n = strlen(load_reason); /* truncation to the caller's size is intended */
    if (n >= len)
        n = len - 1;
    memcpy(reason, load_reason, n);
    reason[n] = '\0';
    pthread_mutex_unlock(&lib_mu);
    return st;
}

/* The transport layers UCC can load, from its component folder (UCC's own
 * UCC_COMPONENT_PATH, else "ucc" beside lib_file, libucc): ", TLs: self,
 * ucp (DIR)". */
static void list_tls(char *out, size_t n, const char *lib_file)
{
    char dir[512];
    const char *env = getenv("UCC_COMPONENT_PATH");
    if (env && *env)
        snprintf(dir, sizeof dir, "%s", env);
    else if (strrchr(lib_file, '/'))
        snprintf(dir, sizeof dir, "%.*s/ucc", (int)(strrchr(lib_file, '/') - lib_file), lib_file);
    else
        return;
    DIR *d = opendir(dir);
    size_t o = strlen(out);
    snprintf(out + o, n - o, "; TLs:");
    struct dirent *e;
    int found = 0;
    while (d && (e = readdir(d)) != NULL) {
        size_t len = strlen(e->d_name);
        if (strncmp(e->d_name, "libucc_tl_", 10) || len < 14 || strcmp(e->d_name + len - 3, ".so"))
            continue;
        o = strlen(out);
        snprintf(out + o, n - o, "%s %.*s", found++ ? "," : "", (int)(len - 13), e->d_name + 10);
    }
    if (d)
        closedir(d);
    o = strlen(out);
    snprintf(out + o, n - o, "%s (%.300s)", found ? "" : " none found", dir);
}

/* By the library's file alone (find.c says why); once a communicator has
 * loaded it, what the load found. */
static int probe(struct plx_probe_result *out)
{
    pthread_mutex_lock(&lib_mu);
    int loaded = load_state >= 0;
    pthread_mutex_unlock(&lib_mu);
    if (loaded) {
        out->state = load(out->reason, sizeof out->reason);
        return 0;
    }
    const char *dir = plx_plugin_config_str(entry_host, NULL, "library_path");
    char path[1024], searched[700];
    if (!ucc_find_library("libucc.so.1", dir, path, sizeof path, searched, sizeof searched)) {
        out->state = PLX_PROBE_UNAVAILABLE;
        snprintf(out->reason, sizeof out->reason, "libucc.so.1 not found (searched %.200s)", searched);
        return 0;
    }
    out->state = PLX_PROBE_USABLE;
    snprintf(out->reason, sizeof out->reason, "%.150s, loaded at the first communicator", path);
    list_tls(out->reason, sizeof out->reason, path);
    return 0;
}

/* The library is initialised once, at the first communicator (not in probe). */
static int init_lib(const struct plx_host *host)
{
    if (lib)
        return 0;
    ucc_lib_config_h cfg;
    ucc_status_t s = u.ucc_lib_config_read(NULL, NULL, &cfg);
    if (s != UCC_OK)
        return plx_plugin_error(host, PLX_ERR_SYSTEM, "ucc: ucc_lib_config_read: %s", serr(s));
    ucc_lib_params_t p = {.mask = UCC_LIB_PARAM_FIELD_THREAD_MODE, .thread_mode = UCC_THREAD_MULTIPLE};
    s = u.ucc_init_version(PLX_UCC_API_MAJOR, PLX_UCC_API_MINOR, &p, cfg, &lib);
    u.ucc_lib_config_release(cfg);
    if (s != UCC_OK) {
        lib = NULL;
        return plx_plugin_error(host, PLX_ERR_SYSTEM, "ucc: ucc_init_version: %s", serr(s));
    }
    return 0;
}

/* ---- out-of-band allgather on the communicator's store -------------------- */

struct oob {
    const struct plx_host *host;
    struct plx_store *store;
    const char *what; /* "ctx" or "team" */
    int rank, size;
    unsigned round;
    int64_t timeout_ms;
    ucc_status_t last;
};

/* Blocking: every rank posts its piece and reads the others' (ordered by
 * oob_ep, as UCC requires); the request is complete when this returns. */
static ucc_status_t oob_allgather(void *src, void *dst, size_t size, void *info, void **req)
{
    struct oob *o = info;
    unsigned r = o->round++;
    char key[96];
    snprintf(key, sizeof key, "ucc/%s/%u/%d", o->what, r, o->rank);
    o->last = UCC_OK;
    if (o->host->store_set(o->store, key, src, size) != 0)
        o->last = -1;
    for (int i = 0; i < o->size && o->last == UCC_OK; i++) {
        void *v = NULL;
        size_t len = 0;
        snprintf(key, sizeof key, "ucc/%s/%u/%d", o->what, r, i);
        if (o->host->store_get(o->store, key, &v, &len, o->timeout_ms) != 0 || len != size) {
            o->host->log(o->host->ctx, PLX_LOG_ERROR, "ucc: out-of-band allgather %s/%u: rank %d's piece %s", o->what, r, i,
                      v ? "has the wrong size" : "never arrived");
            o->last = -1;
        } else {
            memcpy((char *)dst + (size_t)i * size, v, size);
        }
        if (v)
            o->host->free(v);
    }
    *req = o;
    return o->last;
}

static ucc_status_t oob_test(void *req)
{
    return ((struct oob *)req)->last;
}

static ucc_status_t oob_free(void *req)
{
    (void)req;
    return UCC_OK;
}

/* ---- communicators ---------------------------------------------------------- */

struct impl {
    const struct plx_host *host; /* this communicator's instance of the host services */
    ucc_context_h ctx;
    ucc_team_h team;
    struct oob ctx_oob, team_oob;
    int rank, size, aborted;
    int64_t timeout_ms;
    pthread_mutex_t mu; /* UCC calls on one context from one thread at a time */
};

struct req {
    ucc_coll_req_h r;
    void *tmp;
    void *stage_to;     /* before each post: stage_bytes from stage_from to stage_to */
    const void *stage_from;
    size_t stage_bytes;
    void *copy_to;      /* on completion: copy_bytes from copy_from to copy_to */
    const void *copy_from;
    size_t copy_bytes;
    int done, status;
    int in_flight;      /* a prepared one: posted and not yet seen complete (UCC owns it) */
    int64_t timeout_ms; /* a prepared one: each run's */
};

static int comm_create(const struct plx_comm_args *a, void **out)
{
    /* A core of ABI 1.5 hands each communicator its own host services; an
     * older one has only the entry's. */
    const struct plx_host *host = PLX_HAS_FIELD(a, struct plx_comm_args, host) && a->host ? a->host : entry_host;
    char reason[256];
    if (load(reason, sizeof reason) != PLX_PROBE_USABLE)
        return plx_plugin_error(host, PLX_ERR_UNAVAILABLE, "ucc: %s", reason);
    if (!a->store)
        return plx_plugin_error(host, PLX_ERR_INVALID_USAGE, "ucc: needs a rendezvous store for its out-of-band exchange");
    struct impl *c = calloc(1, sizeof *c);
    if (!c)
        return plx_plugin_error(host, PLX_ERR_NOMEM, "ucc: out of memory");
    c->host = host;
    c->rank = a->rank;
    c->size = a->size;
    c->timeout_ms = a->timeout_ms;
    pthread_mutex_init(&c->mu, NULL);
    int64_t create_ms = plx_plugin_create_ms(a); /* the out-of-band exchanges run only in this call */
    c->ctx_oob = (struct oob){c->host, a->store, "ctx", a->rank, a->size, 0, create_ms, UCC_OK};
    c->team_oob = (struct oob){c->host, a->store, "team", a->rank, a->size, 0, create_ms, UCC_OK};

    pthread_mutex_lock(&lib_mu); /* one context/team creation at a time in this process */
    int rc = init_lib(c->host);
    ucc_context_config_h cfg = NULL;
    ucc_status_t s = UCC_OK;
    if (!rc && (s = u.ucc_context_config_read(lib, NULL, &cfg)) != UCC_OK)
        rc = plx_plugin_error(c->host, PLX_ERR_SYSTEM, "ucc: ucc_context_config_read: %s", serr(s));
    if (!rc) {
        ucc_context_params_t cp;
        memset(&cp, 0, sizeof cp);
        cp.mask = UCC_CONTEXT_PARAM_FIELD_OOB;
        cp.type = UCC_CONTEXT_EXCLUSIVE;
        cp.oob = (ucc_oob_coll_t){oob_allgather, oob_test, oob_free, &c->ctx_oob, (uint32_t)a->size, (uint32_t)a->rank};
        s = u.ucc_context_create(lib, &cp, cfg, &c->ctx);
        u.ucc_context_config_release(cfg);
        if (s != UCC_OK)
            rc = plx_plugin_error(c->host, PLX_ERR_SYSTEM, "ucc: rank %d: ucc_context_create: %s", a->rank, serr(s));
    }
    if (!rc) {
        ucc_team_params_t tp;
        memset(&tp, 0, sizeof tp);
        tp.mask = UCC_TEAM_PARAM_FIELD_EP | UCC_TEAM_PARAM_FIELD_EP_RANGE | UCC_TEAM_PARAM_FIELD_OOB;
        tp.ep = (uint64_t)a->rank;
        tp.ep_range = UCC_COLLECTIVE_EP_RANGE_CONTIG;
        tp.oob = (ucc_oob_coll_t){oob_allgather, oob_test, oob_free, &c->team_oob, (uint32_t)a->size, (uint32_t)a->rank};
        s = u.ucc_team_create_post(&c->ctx, 1, &tp, &c->team);
        uint64_t deadline = plx_plugin_deadline(create_ms);
        while (s == UCC_OK || s == UCC_INPROGRESS) {
            if ((s = u.ucc_team_create_test(c->team)) != UCC_INPROGRESS || c->host->clock_ns() > deadline)
                break;
            u.ucc_context_progress(c->ctx); /* team creation hangs without progress */
        }
        if (s == UCC_INPROGRESS)
            rc = plx_plugin_error(c->host, PLX_ERR_TIMEOUT, "ucc: rank %d: team not created after %lld ms", a->rank,
                      (long long)create_ms);
        else if (s != UCC_OK)
            rc = plx_plugin_error(c->host, PLX_ERR_SYSTEM, "ucc: rank %d: team creation: %s", a->rank, serr(s));
    }
    pthread_mutex_unlock(&lib_mu);
    if (rc) {
        if (c->ctx)
            u.ucc_context_destroy(c->ctx);
        free(c);
        return rc;
    }
    *out = c;
    return 0;
}

static int comm_destroy(void *comm)
{
    struct impl *c = comm;
    if (c->team) {
        uint64_t deadline = plx_plugin_deadline(c->timeout_ms);
        while (u.ucc_team_destroy(c->team) == UCC_INPROGRESS && c->host->clock_ns() < deadline)
            u.ucc_context_progress(c->ctx);
    }
    if (c->ctx)
        u.ucc_context_destroy(c->ctx);
    pthread_mutex_destroy(&c->mu);
    free(c);
    return 0;
}

static int comm_abort(void *comm)
{
    struct impl *c = comm;
    __atomic_store_n(&c->aborted, 1, __ATOMIC_RELEASE);
    return 0;
}

static ucc_datatype_t udt(int dt)
{
    static const int ids[PLX_DTYPE_COUNT] = {0, 5, 2, 7, 3, 8, 10, 13, 11, 12};
    return UCC_PREDEFINED_DT(ids[dt]);
}

static int uop(int op)
{
    /* Indexed by the ops caps.redops names; a new plexus op needs its line here first. */
    static const int ops[PLX_BXOR + 1] = {UCC_OP_SUM, UCC_OP_PROD, UCC_OP_MIN,  UCC_OP_MAX,
                                          UCC_OP_AVG, UCC_OP_BAND, UCC_OP_BOR, UCC_OP_BXOR};
    return ops[op];
}

static void info(ucc_coll_buffer_info_t *i, const void *buf, size_t count, int dt, int mem)
{
    i->buffer = (void *)buf;
    i->count = count;
    i->datatype = udt(dt);
    i->mem_type = mem == PLX_MEM_CUDA ? UCC_MEMORY_TYPE_CUDA : UCC_MEMORY_TYPE_HOST;
}

static int ucoll(int coll)
{
    switch (coll) {
    case PLX_COLL_ALLREDUCE: return UCC_COLL_TYPE_ALLREDUCE;
    case PLX_COLL_BROADCAST: return UCC_COLL_TYPE_BCAST;
    case PLX_COLL_REDUCE: return UCC_COLL_TYPE_REDUCE;
    case PLX_COLL_ALLGATHER: return UCC_COLL_TYPE_ALLGATHER;
    case PLX_COLL_REDUCE_SCATTER: return UCC_COLL_TYPE_REDUCE_SCATTER;
    case PLX_COLL_GATHER: return UCC_COLL_TYPE_GATHER;
    case PLX_COLL_SCATTER: return UCC_COLL_TYPE_SCATTER;
    case PLX_COLL_ALLTOALL: return UCC_COLL_TYPE_ALLTOALL;
    default: return UCC_COLL_TYPE_BARRIER;
    }
}

/* plexus's in-place forms, which differ from UCC's. */
static int in_place(const struct plx_coll_args *a, size_t me, size_t n, size_t es)
{
    const char *s = a->send, *r = a->recv;
    size_t off = me * n * es;
    return s == r || (a->coll == PLX_COLL_ALLGATHER && s == r + off) ||
           (a->coll == PLX_COLL_REDUCE_SCATTER && r == s + off) || (a->coll == PLX_COLL_GATHER && s == r + off) ||
           (a->coll == PLX_COLL_SCATTER && r == s + off);
}

/* Where UCC 1.3's TLs lack the collective (init answered -1): a scatter as a
 * broadcast of the root's blocks, a reduce-scatter as an allreduce of a
 * copy; either keeps this rank's block (q's copy on completion). */
static ucc_status_t init_fallback(struct impl *c, ucc_coll_args_t *ca, struct req *q, const struct plx_coll_args *a,
                                  const void *s, size_t es)
{
    size_t n = a->count, P = (size_t)c->size, me = (size_t)c->rank;
    if (a->coll != PLX_COLL_SCATTER && a->coll != PLX_COLL_REDUCE_SCATTER)
        return -1;
    char *all = malloc(n * P * es + 1);
    if (!all)
        return -1;
    (void)s; /* the caller's send, not a staging copy of it: that is freed below */
    q->stage_from = a->send;
    q->stage_to = all;
    q->stage_bytes = a->coll == PLX_COLL_SCATTER && c->rank != a->root ? 0 : n * P * es;
    if (a->coll == PLX_COLL_SCATTER) {
        ca->coll_type = UCC_COLL_TYPE_BCAST;
    } else {
        ca->coll_type = UCC_COLL_TYPE_ALLREDUCE;
        ca->flags |= UCC_COLL_ARGS_FLAG_IN_PLACE;
        info(&ca->dst.info, all, n * P, a->dtype, a->mem_kind);
    }
    info(&ca->src.info, all, n * P, a->dtype, a->mem_kind);
    free(q->tmp);
    q->tmp = all;
    q->copy_to = a->recv;
    q->copy_from = all + me * n * es;
    q->copy_bytes = n * es;
    return u.ucc_collective_init(ca, &q->r, c->team);
}

/* q's UCC request for a (flags: UCC_COLL_ARGS_FLAG_PERSISTENT or 0), and
 * what is staged before each post and copied back after (c->mu held). */
static ucc_status_t init(struct impl *c, const struct plx_coll_args *a, struct req *q, uint64_t flags)
{
    size_t n = a->count, P = (size_t)c->size, me = (size_t)c->rank, es = plx_plugin_dtype_size(a->dtype);
    ucc_coll_args_t ca;
    memset(&ca, 0, sizeof ca);
    ca.mask = UCC_COLL_ARGS_FIELD_FLAGS;
    ca.flags = UCC_COLL_ARGS_FLAG_COUNT_64BIT | flags;
    ca.root = (uint64_t)a->root;
    ca.op = uop(a->op);
    ca.coll_type = ucoll(a->coll);
    const void *s = a->send;
    void *r = a->recv;
    size_t sbytes = n * es * (a->coll == PLX_COLL_REDUCE_SCATTER || a->coll == PLX_COLL_SCATTER ||
                                      a->coll == PLX_COLL_ALLTOALL ? P : 1);
    /* UCC's in-place forms differ from plexus's: stage through a copy instead. */
    if (in_place(a, me, n, es) && a->coll != PLX_COLL_BROADCAST && a->coll != PLX_COLL_BARRIER && sbytes) {
        if (!(q->tmp = malloc(sbytes)))
            return -2;
        q->stage_from = s;
        q->stage_to = q->tmp;
        q->stage_bytes = sbytes;
        s = q->tmp;
    }
    size_t rcount = a->coll == PLX_COLL_ALLGATHER || a->coll == PLX_COLL_GATHER || a->coll == PLX_COLL_ALLTOALL ? n * P
                    : n;
    size_t scount = sbytes / (es ? es : 1);
    if (a->coll == PLX_COLL_BROADCAST)
        info(&ca.src.info, r, n, a->dtype, a->mem_kind);
    else
        info(&ca.src.info, s, scount, a->dtype, a->mem_kind);
    info(&ca.dst.info, r, rcount, a->dtype, a->mem_kind);
    ucc_status_t st = u.ucc_collective_init(&ca, &q->r, c->team);
    return st == -1 ? init_fallback(c, &ca, q, a, s, es) : st;
}

/* Stage the input, then post (c->mu held). */
static ucc_status_t post(struct req *q)
{
    if (q->stage_bytes)
        memcpy(q->stage_to, q->stage_from, q->stage_bytes);
    return u.ucc_collective_post(q->r);
}

static int init_error(struct impl *c, ucc_status_t st, const char *what)
{
    return st == -2 ? plx_plugin_error(c->host, PLX_ERR_NOMEM, "ucc: out of memory")
                    : plx_plugin_error(c->host, st == -1 ? PLX_ERR_UNSUPPORTED : PLX_ERR_SYSTEM, "ucc: %s: %s", what,
                                       serr(st));
}

static int collective(void *comm, const struct plx_coll_args *a, void **out)
{
    struct impl *c = comm;
    if (__atomic_load_n(&c->aborted, __ATOMIC_ACQUIRE))
        return plx_plugin_error(c->host, PLX_ERR_ABORTED, "ucc: communicator aborted");
    struct req *q = calloc(1, sizeof *q);
    if (!q)
        return plx_plugin_error(c->host, PLX_ERR_NOMEM, "ucc: out of memory");
    pthread_mutex_lock(&c->mu);
    ucc_status_t st = init(c, a, q, 0);
    if (st == UCC_OK)
        st = post(q);
    pthread_mutex_unlock(&c->mu);
    if (st != UCC_OK) {
        free(q->tmp);
        free(q);
        return init_error(c, st, "posting a collective");
    }
    *out = q;
    return 0;
}

static int test(void *comm, void *req, int *done)
{
    struct impl *c = comm;
    struct req *q = req;
    if (!q->done) {
        pthread_mutex_lock(&c->mu);
        u.ucc_context_progress(c->ctx);
        ucc_status_t st = q->r->status; /* what the inline ucc_collective_test reads */
        pthread_mutex_unlock(&c->mu);
        if (st != UCC_INPROGRESS && st != UCC_OPERATION_INITIALIZED) {
            q->done = 1;
            if (st == UCC_OK && q->copy_bytes)
                memcpy(q->copy_to, q->copy_from, q->copy_bytes);
            q->status = st == UCC_OK ? 0 : plx_plugin_error(c->host, PLX_ERR_SYSTEM, "ucc: collective failed: %s", serr(st));
        } else if (__atomic_load_n(&c->aborted, __ATOMIC_ACQUIRE)) {
            return plx_plugin_error(c->host, PLX_ERR_ABORTED, "ucc: communicator aborted");
        }
    }
    *done = q->done;
    return q->done ? q->status : 0;
}

static void req_free(void *comm, void *req)
{
    struct impl *c = comm;
    struct req *q = req;
    if (q->done) { /* a pending UCC request cannot be finalized: leave it to UCC's teardown */
        pthread_mutex_lock(&c->mu);
        u.ucc_collective_finalize(q->r);
        pthread_mutex_unlock(&c->mu);
        free(q->tmp);
    }
    free(q);
}

/* ---- prepared collectives (ABI 1.12): UCC's persistent collectives ----- */

/* The request is made once (ucc_collective_init with
 * UCC_COLL_ARGS_FLAG_PERSISTENT: UCC picks its algorithm and sets up its
 * task once), and each run stages the input, posts it again and waits. */
static int coll_prepare(void *comm, const struct plx_coll_args *a, void **prep)
{
    struct impl *c = comm;
    struct req *q = calloc(1, sizeof *q);
    if (!q)
        return plx_plugin_error(c->host, PLX_ERR_NOMEM, "ucc: out of memory");
    pthread_mutex_lock(&c->mu);
    ucc_status_t st = init(c, a, q, UCC_COLL_ARGS_FLAG_PERSISTENT);
    pthread_mutex_unlock(&c->mu);
    if (st != UCC_OK) {
        free(q->tmp);
        free(q);
        return init_error(c, st, "preparing a persistent collective");
    }
    q->timeout_ms = a->timeout_ms >= 0 ? a->timeout_ms : c->timeout_ms;
    *prep = q;
    return 0;
}

static int coll_run(void *comm, void *prep, uint64_t seq)
{
    (void)seq;
    struct impl *c = comm;
    struct req *q = prep;
    if (__atomic_load_n(&c->aborted, __ATOMIC_ACQUIRE))
        return plx_plugin_error(c->host, PLX_ERR_ABORTED, "ucc: communicator aborted");
    if (q->in_flight) /* a run that timed out is still UCC's */
        return plx_plugin_error(c->host, PLX_ERR_INVALID_USAGE, "ucc: the last run of this collective never ended");
    pthread_mutex_lock(&c->mu);
    ucc_status_t st = post(q);
    pthread_mutex_unlock(&c->mu);
    if (st != UCC_OK)
        return plx_plugin_error(c->host, PLX_ERR_SYSTEM, "ucc: posting a persistent collective: %s", serr(st));
    q->in_flight = 1;
    q->done = 0;
    uint64_t deadline = plx_plugin_deadline(q->timeout_ms);
    for (unsigned spins = 0;; spins++) {
        int done = 0, rc = test(c, q, &done);
        if (done) {
            q->in_flight = 0;
            return rc;
        }
        if (rc) /* aborted: UCC still owns the request */
            return rc;
        if (c->host->clock_ns() >= deadline)
            return plx_plugin_error(c->host, PLX_ERR_TIMEOUT, "ucc: rank %d: a collective not complete after %lld ms",
                                    c->rank, (long long)q->timeout_ms);
        plx_plugin_poll_pause(spins);
    }
}

static void coll_unprepare(void *comm, void *prep)
{
    struct req *q = prep;
    q->done = !q->in_flight; /* a request UCC still runs is left to UCC's teardown, as req_free leaves it */
    req_free(comm, q);
}

/* UCC's CPU reductions have no f16 (1.3 and 1.9: its TL logs a failed
 * reduction, and 1.9's request may still end UCC_OK), so an f16 reduction
 * is refused rather than computed wrong; f16 that only
 * moves (broadcast, gathers, scatter, alltoall) UCC serves as 16-bit data. */
static int op_supported(void *comm, int coll, int dtype, int op, int mem_kind)
{
    (void)comm;
    (void)op;
    (void)mem_kind;
    int reduces = coll == PLX_COLL_ALLREDUCE || coll == PLX_COLL_REDUCE || coll == PLX_COLL_REDUCE_SCATTER;
    return dtype != PLX_F16 || !reduces;
}

static int get_caps(void *comm, struct plx_caps *out)
{
    (void)comm;
    uint32_t size = out->struct_size;
    struct plx_caps caps = {
        .struct_size = size,
        .flags = PLX_CAP_ABORT | PLX_CAP_INPLACE | PLX_CAP_MULTI_NODE | PLX_CAP_THREAD_SAFE,
        .collectives = PLX_BIT(PLX_COLL_SEND) - 1,
        .dtypes = PLX_BIT(PLX_DTYPE_COUNT) - 1, /* f16: see op_supported */
        .redops = PLX_BIT(PLX_BXOR + 1) - 1, /* each one uop() maps; not a count that grows */
        .mem_kinds = PLX_BIT(PLX_MEM_HOST) | PLX_BIT(PLX_MEM_CUDA),
    };
    memcpy(out, &caps, size < sizeof caps ? size : sizeof caps);
    return 0;
}

static const struct plx_key keys[] = {
    {"library_path", PLX_KEY_STRING, NULL, NULL, "Folder searched for libucc.so.1 after the system's path"},
    {NULL, 0, NULL, NULL, NULL},
};

static const struct plx_backend backend = {
    .struct_size = sizeof(struct plx_backend),
    .abi_minor = PLX_ABI_MINOR,
    .name = "ucc",
    .version = "0.1.0",
    .description = "UCC collectives (loaded at run time; out-of-band exchange through the plexus store)",
    .keys = keys,
    .probe = probe,
    .get_caps = get_caps,
    .comm_create = comm_create,
    .comm_destroy = comm_destroy,
    .comm_abort = comm_abort,
    .collective = collective,
    .test = test,
    .req_free = req_free,
    .op_supported = op_supported,
    .coll_prepare = coll_prepare,
    .coll_run = coll_run,
    .coll_unprepare = coll_unprepare,
};

/* ABI 1.3 at least: ucc reads its keys typed. */
PLX_PLUGIN_ENTRY(backend, entry_host, 3)
