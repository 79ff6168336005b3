/* loader.c - backends from drop-ins: dlopen, ABI negotiation, validation,
 * probe, and selection. A failure is recorded on that backend with its
 * reason and never stops the others. Plugins are never dlclose'd: a plugin
 * may have started threads or registered handlers we cannot see. */
#include "loader.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <limits.h>
#include <sys/stat.h>

#include "config.h"
#include "config_keys.h"
#include "error.h"
#include "host.h"
#include "log.h"

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct plx__backend **backends;
static size_t n_backends;
static int discovered;

/* Size of struct plx_backend in ABI 1.0: everything before comm_split. */
#define ABI_1_0_SIZE offsetof(struct plx_backend, comm_split)

static void set_state(struct plx__backend *b, int state, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static void set_state(struct plx__backend *b, int state, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(b->reason, sizeof b->reason, fmt, ap);
    va_end(ap);
    b->state = state;
    int level = state == PLX_STATE_BROKEN ? PLX_LOG_WARN : PLX_LOG_DEBUG;
    plx__log(level, "loader", "backend '%s' (%s): %s: %s", b->name, b->library ? b->library : "-",
             plx_backend_state_name(state), b->reason);
}

/* A plugin of ABI 1.0-1.2 reads its keys untyped through the process-wide
 * host, with no view in hand; the documented contract gives it the new
 * communicator's configuration during comm_create and comm_split. The view
 * of such a call, for that thread's config_get (the one place a view is
 * implicit, kept for those plugins). */
static _Thread_local const struct plx_config *creating;

const char *plx__backend_config_get(void *ctx, const char *key)
{
    const struct plx__host_ctx *h = ctx;
    const struct plx_config *v = h->comm ? h->config : creating;
    return plx__config_get_in(v, plx__config_section(v, h->be->name), key, NULL);
}

/* What a plugin of b's minor reads in a: before ABI 1.10 it has no
 * create_timeout_ms, and its timeout_ms bounds the call instead. */
static const struct plx_comm_args *args_for(const struct plx__backend *b, const struct plx_comm_args *a,
                                            struct plx_comm_args *old)
{
    if (!a || b->abi_minor >= 10 || !PLX_HAS_FIELD(a, struct plx_comm_args, create_timeout_ms) || !a->create_timeout_ms)
        return a;
    *old = *a;
    old->timeout_ms = a->create_timeout_ms;
    return old;
}

int plx__backend_comm_create(const struct plx__backend *b, const struct plx_comm_args *a, void **out)
{
    const struct plx_config *outer = creating;
    struct plx_comm_args old;
    creating = a->config;
    int rc = b->ops.comm_create(args_for(b, a, &old), out);
    creating = outer;
    return rc;
}

int plx__backend_comm_split(const struct plx__backend *b, void *bc, int color, int key,
                            const struct plx_comm_args *a, void **out)
{
    const struct plx_config *outer = creating;
    struct plx_comm_args old;
    creating = a ? a->config : NULL;
    int rc = b->ops.comm_split(bc, color, key, args_for(b, a, &old), out);
    creating = outer;
    return rc;
}

int plx__backend_comm_shrink(const struct plx__backend *b, void *bc, unsigned char *alive, int agreed,
                             const struct plx_comm_args *a, void **out)
{
    const struct plx_config *outer = creating;
    struct plx_comm_args old;
    creating = a->config;
    int rc = b->ops.comm_shrink(bc, alive, agreed, args_for(b, a, &old), out);
    creating = outer;
    return rc;
}

static const char *const required_ops[] = {"probe", "get_caps", "comm_create", "comm_destroy", "test", "req_free"};

static int missing_required(const struct plx_backend *o)
{
    const void *ptrs[] = {(const void *)o->probe, (const void *)o->get_caps, (const void *)o->comm_create,
                          (const void *)o->comm_destroy, (const void *)o->test, (const void *)o->req_free};
    for (int i = 0; i < 6; i++)
        if (!ptrs[i])
            return i;
    return -1;
}

/* The backend's keys: typed (ABI 1.3), declared to the config, which checks
 * what the files and variables gave them; or an older plugin's untyped
 * params, listed as strings and left to the plugin to check. */
static int declare_keys(struct plx__backend *b)
{
    if (b->abi_minor >= 3 && b->ops.keys) {
        b->keys = b->ops.keys;
        return plx__config_declare(b->name, b->keys);
    }
    size_t n = 0;
    for (const struct plx_param *p = b->ops.params; p && p->key; p++)
        n++;
    struct plx_key *k = calloc(n + 1, sizeof *k);
    if (!k)
        return plx__err(PLX_ERR_NOMEM, "loader: out of memory");
    for (size_t i = 0; i < n; i++)
        k[i] = (struct plx_key){.key = b->ops.params[i].key, .type = PLX_KEY_STRING,
                                .default_value = b->ops.params[i].default_value, .help = b->ops.params[i].help};
    b->keys = b->own_keys = k;
    return 0;
}

/* A drop-in's requires_env: 1 when one of its variables is set (or it has
 * none). A probe must not have side effects, and loading a transport library
 * has them (MPICH brings UCX, whose signal handlers then catch the user's
 * own crashes): a backend that can only run under its launcher is not even
 * loaded without it. */
static int required_env_set(struct plx__backend *b)
{
    const char *list = plx__config_get_in(NULL, b->name, "requires_env", NULL);
    if (!list || !*list)
        return 1;
    char buf[512];
    snprintf(buf, sizeof buf, "%s", list);
    char *save = NULL;
    for (char *v = strtok_r(buf, ", \t", &save); v; v = strtok_r(NULL, ", \t", &save))
        if (getenv(v))
            return 1;
    const char *why = plx__config_get_in(NULL, b->name, "requires_reason", NULL);
    if (why && *why)
        set_state(b, PLX_STATE_UNAVAILABLE, "%s (not loaded)", why);
    else
        set_state(b, PLX_STATE_UNAVAILABLE, "none of %s is set (not loaded)", list);
    return 0;
}

/* The library's entry point, or NULL with the backend marked broken (no
 * library, not loadable, not a plexus backend, or one of another ABI major). */
static plx_backend_entry_v1_fn open_entry(struct plx__backend *b)
{
    struct stat st;
    if (stat(b->library, &st) != 0) {
        set_state(b, PLX_STATE_BROKEN, "library %s not found (from %s)", b->library, b->dropin);
        return NULL;
    }
    void *h = dlopen(b->library, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        set_state(b, PLX_STATE_BROKEN, "cannot load %s: %s (not a shared object, or a dependency is missing?)",
                  b->library, e ? e : "unknown error");
        return NULL;
    }
    plx_backend_entry_v1_fn entry = (plx_backend_entry_v1_fn)dlsym(h, PLX_BACKEND_ENTRY_V1_NAME);
    if (entry)
        return entry;
    for (int major = 9; major >= 2; major--) {
        char sym[64];
        snprintf(sym, sizeof sym, "plx_backend_entry_v%d", major);
        if (dlsym(h, sym)) {
            set_state(b, PLX_STATE_BROKEN,
                      "%s is built for plugin ABI major %d; this plexus supports major %d (no %s)", b->library,
                      major, PLX_ABI_MAJOR, PLX_BACKEND_ENTRY_V1_NAME);
            return NULL;
        }
    }
    set_state(b, PLX_STATE_BROKEN, "%s is not a plexus backend: no symbol %s", b->library,
              PLX_BACKEND_ENTRY_V1_NAME);
    return NULL;
}

/* Call the entry point, agree on the minor and take the plugin's table into
 * b->ops, checked: the minor it answers, the table's size, the required
 * operations, the request size, its name. Returns 0 and the minor the
 * plugin was built for, or -1 with the backend marked broken. */
static int negotiate(struct plx__backend *b, plx_backend_entry_v1_fn entry, uint32_t *built_for)
{
    b->host_ctx = (struct plx__host_ctx){.be = b};
    plx__host_init(&b->host, &b->host_ctx);
    uint32_t minor = PLX_ABI_MINOR;
    const struct plx_backend *desc = NULL;
    plx__err_clear();
    int rc = entry(&b->host, &minor, &desc);
    if (rc != 0 || !desc) {
        set_state(b, PLX_STATE_BROKEN, "%s: entry point failed: %s%s%s", b->library, plx_err_name(rc),
                  plx_last_error()[0] ? ": " : "", plx_last_error());
        return -1;
    }
    if (minor > PLX_ABI_MINOR) {
        set_state(b, PLX_STATE_BROKEN, "%s answered ABI minor %u, newer than this plexus's %u (it must answer the "
                  "smaller of the two)", b->library, minor, PLX_ABI_MINOR);
        return -1;
    }
    if (desc->struct_size < ABI_1_0_SIZE) {
        set_state(b, PLX_STATE_BROKEN, "%s: struct plx_backend is %u bytes, smaller than ABI 1.0's %zu",
                  b->library, desc->struct_size, (size_t)ABI_1_0_SIZE);
        return -1;
    }
    /* Copy what the plugin has; fields beyond its size read as NULL/0. A size
     * that ends inside a field must not leave part of a pointer behind, so it
     * is rounded down to whole pointers (after the two u32 that open it, every
     * field is a pointer). */
    size_t have = desc->struct_size < sizeof b->ops ? desc->struct_size : sizeof b->ops;
    memset(&b->ops, 0, sizeof b->ops);
    memcpy(&b->ops, desc, have - have % sizeof(void *));
    b->ops.struct_size = (uint32_t)sizeof b->ops;
    b->abi_major = PLX_ABI_MAJOR;
    b->abi_minor = minor;
    *built_for = desc->abi_minor;
    int miss = missing_required(&b->ops);
    if (miss >= 0) {
        set_state(b, PLX_STATE_BROKEN, "%s lacks the required operation '%s'", b->library, required_ops[miss]);
        return -1;
    }
    if (minor < 5)
        b->ops.req_size = 0; /* a field of a newer minor than the one agreed */
    if (minor < 12 || !b->ops.coll_prepare || !b->ops.coll_run || !b->ops.coll_unprepare)
        b->ops.coll_prepare = NULL; /* the three come together (ABI 1.12) */
    if (b->ops.req_size > PLX__REQ_SIZE_MAX) {
        set_state(b, PLX_STATE_BROKEN, "%s asks for %zu-byte requests; ABI 1.5 allows at most %d", b->library,
                  b->ops.req_size, PLX__REQ_SIZE_MAX);
        return -1;
    }
    if (!b->ops.name || strcmp(b->ops.name, b->name)) {
        set_state(b, PLX_STATE_BROKEN, "%s declares the name '%s' but its drop-in section is [%s] (%s)", b->library,
                  b->ops.name ? b->ops.name : "(null)", b->name, b->dropin);
        return -1;
    }
    return 0;
}

/* The backend's "plexus.sim" hooks into b->sim, asked for once (ABI 1.11)
 * and copied like the table. A plugin of ABI 1.6 to 1.10 had them in the
 * table's slots now reserved; they are honoured for it, so that a
 * simulator built then still models the same times. */
static void find_sim_ext(struct plx__backend *b)
{
    memset(&b->sim, 0, sizeof b->sim);
    if (b->abi_minor < 11) {
        b->ops.extension = NULL; /* a field of a newer minor than the one agreed */
        if (b->abi_minor >= 6)
            b->sim.charge_reduce = b->ops.reserved_1_6;
        if (b->abi_minor >= 9)
            b->sim.op_footprint = b->ops.reserved_1_9;
        return;
    }
    const struct plx_ext_sim *e = b->ops.extension ? b->ops.extension(PLX_EXT_SIM, PLX_EXT_SIM_VERSION) : NULL;
    if (!e || e->version < PLX_EXT_SIM_VERSION)
        return;
    /* As the table: whole pointers only after the two u32 that open it. */
    size_t have = e->struct_size < sizeof b->sim ? e->struct_size : sizeof b->sim;
    memcpy(&b->sim, e, have - have % sizeof(void *));
    b->sim.struct_size = (uint32_t)sizeof b->sim;
}

void plx__caps_for_minor(const struct plx__backend *b, struct plx_caps *k)
{
    if (b->abi_minor < 13)
        k->redops &= PLX_BIT(PLX_AVG + 1) - 1;
}

/* A loaded backend's capabilities and its probe's verdict, as its state. */
static void probe_one(struct plx__backend *b)
{
    b->caps = (struct plx_caps){.struct_size = sizeof b->caps};
    int rc = b->ops.get_caps(NULL, &b->caps);
    if (rc != 0) {
        set_state(b, PLX_STATE_BROKEN, "get_caps failed: %s", plx_err_name(rc));
        return;
    }
    plx__caps_for_minor(b, &b->caps);
    struct plx_probe_result pr = {.struct_size = sizeof pr};
    rc = b->ops.probe(&pr);
    pr.reason[sizeof pr.reason - 1] = '\0';
    if (rc != 0)
        set_state(b, PLX_STATE_BROKEN, "probe failed: %s%s%s", plx_err_name(rc), pr.reason[0] ? ": " : "", pr.reason);
    else if (pr.state == PLX_PROBE_USABLE)
        set_state(b, PLX_STATE_USABLE, "%s", pr.reason); /* what it will use, for plexus-info */
    else if (pr.state == PLX_PROBE_UNAVAILABLE)
        set_state(b, PLX_STATE_UNAVAILABLE, "%s", pr.reason);
    else
        set_state(b, PLX_STATE_BROKEN, "%s", pr.reason[0] ? pr.reason : "probe says broken");
}

/* Load, negotiate, validate and probe one backend; the outcome is its state. */
static void load_one(struct plx__backend *b)
{
    if (!required_env_set(b))
        return;
    plx_backend_entry_v1_fn entry = open_entry(b);
    uint32_t built_for = 0;
    if (!entry || negotiate(b, entry, &built_for) != 0)
        return;
    find_sim_ext(b);
    if (declare_keys(b) != 0) {
        set_state(b, PLX_STATE_BROKEN, "%s", plx_last_error());
        return;
    }
    plx__log(PLX_LOG_DEBUG, "loader", "loaded %s: backend '%s' %s, ABI %u.%u (plugin built for %u.%u, core %u.%u)",
             b->library, b->name, b->ops.version ? b->ops.version : "?", b->abi_major, b->abi_minor, PLX_ABI_MAJOR,
             built_for, PLX_ABI_MAJOR, PLX_ABI_MINOR);
    b->state = PLX_STATE_LOADED;
    probe_one(b);
}

static struct plx__backend *find_locked(const char *name)
{
    for (size_t i = 0; i < n_backends; i++)
        if (!strcasecmp(backends[i]->name, name))
            return backends[i];
    return NULL;
}

/* An alias ([mpi] alias = mpi-openmpi, mpi-mpich) stands for the first
 * usable backend of its list: it takes that backend's operations,
 * capabilities and keys under its own name, so one loaded library serves
 * both drop-ins with one host. None usable: unavailable, with the drop-in's
 * alias_reason (or the list) and what each target said. */
static void resolve_alias(struct plx__backend *b)
{
    char list[512], why[900] = "";
    snprintf(list, sizeof list, "%s", b->alias);
    char *save = NULL;
    for (char *t = strtok_r(list, ", \t", &save); t; t = strtok_r(NULL, ", \t", &save)) {
        struct plx__backend *to = find_locked(t);
        size_t l = strlen(why);
        if (!to || to->alias) {
            snprintf(why + l, sizeof why - l, "%s%s: %s", l ? "; " : "", t, to ? "an alias itself" : "no such backend");
            continue;
        }
        if (to->state != PLX_STATE_USABLE) {
            snprintf(why + l, sizeof why - l, "%s%s: %s: %s", l ? "; " : "", t, plx_backend_state_name(to->state),
                     to->reason);
            continue;
        }
        b->target = to;
        b->ops = to->ops;
        b->sim = to->sim;
        b->caps = to->caps;
        b->keys = to->keys;
        b->abi_major = to->abi_major;
        b->abi_minor = to->abi_minor;
        free(b->library);
        b->library = strdup(to->library);
        char desc[400];
        snprintf(desc, sizeof desc, "alias of %s here: %s", to->name, to->ops.description ? to->ops.description : "");
        b->ops.description = b->own_description = strdup(desc);
        if (to->abi_minor >= 3 && to->ops.keys && plx__config_declare(b->name, to->ops.keys) != 0) {
            set_state(b, PLX_STATE_BROKEN, "%s", plx_last_error());
            return;
        }
        set_state(b, PLX_STATE_USABLE, "%s", to->reason);
        return;
    }
    const char *said = plx__config_get_in(NULL, b->name, "alias_reason", NULL);
    if (said && *said)
        set_state(b, PLX_STATE_UNAVAILABLE, "%s (%s)", said, why);
    else
        set_state(b, PLX_STATE_UNAVAILABLE, "none of %s is usable here (%s)", b->alias, why);
}

static int by_priority(const void *x, const void *y)
{
    const struct plx__backend *a = *(struct plx__backend *const *)x, *b = *(struct plx__backend *const *)y;
    if (a->priority != b->priority)
        return a->priority > b->priority ? -1 : 1;
    return strcmp(a->name, b->name);
}

int plx__loader_discover(void)
{
    pthread_mutex_lock(&mu);
    if (discovered) {
        pthread_mutex_unlock(&mu);
        return 0;
    }
    size_t n = plx__config_dropin_count();
    backends = calloc(n ? n : 1, sizeof *backends);
    for (size_t i = 0; backends && i < n; i++) {
        const struct plx__dropin *d = plx__config_dropin(i);
        struct plx__backend *b = calloc(1, sizeof *b);
        if (!b)
            break;
        char where[4200];
        snprintf(where, sizeof where, "%s:%d", d->file, d->line);
        b->name = strdup(d->section);
        char real[4096];
        if (d->alias && !d->library) {
            b->alias = strdup(d->alias);
            b->library = strdup("-");
        } else {
            b->library = strdup(d->library && realpath(d->library, real) ? real : d->library ? d->library : "-");
        }
        b->dropin = strdup(where);
        b->priority = d->priority;
        b->state = PLX_STATE_DISCOVERED;
        backends[n_backends++] = b;
        if (!d->enabled) {
            const char *origin = NULL;
            plx__config_get_in(NULL, d->section, "enabled", &origin);
            set_state(b, PLX_STATE_DISABLED, "disabled by %s", origin);
        } else if (!b->alias)
            load_one(b);
    }
    for (size_t i = 0; i < n_backends; i++)
        if (backends[i]->alias && backends[i]->state != PLX_STATE_DISABLED)
            resolve_alias(backends[i]);
    qsort(backends, n_backends, sizeof *backends, by_priority);
    discovered = 1;
    pthread_mutex_unlock(&mu);
    return backends ? 0 : plx__err(PLX_ERR_NOMEM, "loader: out of memory");
}

size_t plx__loader_count(void)
{
    return n_backends;
}

struct plx__backend *plx__loader_at(size_t i)
{
    return i < n_backends ? backends[i] : NULL;
}

struct plx__backend *plx__loader_find(const char *name)
{
    for (size_t i = 0; i < n_backends; i++)
        if (!strcasecmp(backends[i]->name, name))
            return backends[i];
    return NULL;
}

static int unknown_name(const char *name)
{
    const char *best = NULL;
    int bd = 99;
    char known[512] = "";
    for (size_t i = 0; i < n_backends; i++) {
        int d = plx__edit_distance(name, backends[i]->name);
        if (d < bd) {
            bd = d;
            best = backends[i]->name;
        }
        if (strlen(known) + strlen(backends[i]->name) + 3 < sizeof known) {
            if (known[0])
                strcat(known, ", ");
            strcat(known, backends[i]->name);
        }
    }
    if (best && bd <= 2)
        return plx__err(PLX_ERR_NOT_FOUND, "unknown backend '%s' (did you mean '%s'?); known: %s", name, best,
                        known[0] ? known : "none");
    return plx__err(PLX_ERR_NOT_FOUND, "unknown backend '%s'; known: %s", name, known[0] ? known : "none");
}

static int unusable(const struct plx__backend *b)
{
    int code = b->state == PLX_STATE_UNAVAILABLE ? PLX_ERR_UNAVAILABLE
               : b->state == PLX_STATE_DISABLED  ? PLX_ERR_UNAVAILABLE
                                                 : PLX_ERR_BROKEN;
    return plx__err(code, "backend '%s' (library %s, drop-in %s) is %s: %s", b->name, b->library, b->dropin,
                    plx_backend_state_name(b->state), b->reason);
}

int plx__loader_select(const char *spec, struct plx__backend **out)
{
    return plx__loader_select_after(NULL, spec, NULL, out);
}

int plx__loader_select_after(const struct plx_config *v, const char *spec, const struct plx__backend *after,
                             struct plx__backend **out)
{
    return plx__loader_select_placed(v, spec, after, PLX__PLACE_UNKNOWN, out, NULL, 0);
}

/* auto: the first usable backend after `after` in merit.c's order, less
 * the ^excluded ones. */
static int select_auto(const struct plx_config *v, const char *spec, const struct plx__backend *after, int place,
                       const char *const *skip, int nsk, struct plx__backend **out, char *why, size_t wn)
{
    struct plx__backend **order = calloc(n_backends ? n_backends : 1, sizeof *order);
    size_t n = 0;
    if (!order)
        return plx__err(PLX_ERR_NOMEM, "loader: out of memory");
    int rc = plx__merit_order(v, place, order, &n);
    size_t from = 0;
    for (size_t i = 0; rc == 0 && after && i < n; i++)
        if (order[i] == after)
            from = i + 1;
    for (size_t i = from; rc == 0 && i < n && !*out; i++) {
        int skipped = 0;
        for (int j = 0; j < nsk; j++)
            skipped |= !strcasecmp(skip[j], order[i]->name);
        if (!skipped && order[i]->state == PLX_STATE_USABLE)
            *out = order[i];
    }
    if (*out && why)
        plx__merit_explain(v, place, *out, order, n, why, wn);
    free(order);
    if (rc == 0 && !*out)
        rc = plx__err(PLX_ERR_UNAVAILABLE, "no usable backend for '%s' (%zu found; run plexus-info to see why)",
                      spec, n_backends);
    return rc;
}

int plx__loader_select_placed(const struct plx_config *v, const char *spec, const struct plx__backend *after,
                              int place, struct plx__backend **out, char *why, size_t wn)
{
    if (why && wn)
        why[0] = '\0';
    const char *named = spec ? "the options" : "[core] backend or PLEXUS_BACKEND";
    *out = NULL;
    if (!spec)
        spec = plx__config_get_in(v, "core", "backend", NULL);
    if (!spec || !spec[0])
        spec = "auto";
    char buf[512], msg[600];
    /* The same rule as the [core] backend key: a list with no empty item. */
    if (plx__key_check("core", "backend", PLX_KEY_LIST, NULL, spec, msg, sizeof msg) != 0)
        return plx__err(PLX_ERR_CONFIG, "%s", msg);
    snprintf(buf, sizeof buf, "%s", spec);
    const char *want[32], *skip[32];
    int nw = 0, nsk = 0;
    char *save = NULL;
    for (char *t = strtok_r(buf, ", ", &save); t; t = strtok_r(NULL, ", ", &save)) {
        if (!strcmp(t, "auto"))
            continue;
        const char *name = t[0] == '^' ? t + 1 : t;
        if (!plx__loader_find(name))
            return unknown_name(name);
        if (t[0] == '^' && nsk < 32)
            skip[nsk++] = name;
        else if (t[0] != '^' && nw < 32)
            want[nw++] = name;
    }
    if (nw == 1) {
        struct plx__backend *b = plx__loader_find(want[0]);
        if (after)
            return plx__err(PLX_ERR_UNAVAILABLE, "backend '%s' was asked for by name: no other is tried", b->name);
        if (b->state != PLX_STATE_USABLE)
            return unusable(b);
        *out = b;
        if (why)
            snprintf(why, wn, "asked for by name (%s)", named);
        return 0;
    }
    if (nw > 1) {
        int from = 0;
        for (int i = 0; after && i < nw; i++)
            if (plx__loader_find(want[i]) == after)
                from = i + 1;
        for (int i = from; i < nw; i++) {
            struct plx__backend *b = plx__loader_find(want[i]);
            if (b->state == PLX_STATE_USABLE) {
                *out = b;
                if (why)
                    snprintf(why, wn, "the first usable of the list '%s' (%s)", spec, named);
                return 0;
            }
        }
        char why[900] = "";
        for (int i = 0; i < nw; i++) {
            const struct plx__backend *b = plx__loader_find(want[i]);
            size_t l = strlen(why);
            snprintf(why + l, sizeof why - l, "%s%s: %s: %s", i ? "; " : "", b->name,
                     plx_backend_state_name(b->state), b->reason);
        }
        return plx__err(PLX_ERR_UNAVAILABLE, "none of the backends '%s' is usable: %s", spec, why);
    }
    return select_auto(v, spec, after, place, skip, nsk, out, why, wn);
}

void plx__loader_broken_in(const struct plx_config *v, const char *spec, char *out, size_t n)
{
    if (!spec)
        spec = plx__config_get_in(v, "core", "backend", NULL);
    if (!spec || !spec[0])
        spec = "auto";
    char buf[512];
    snprintf(buf, sizeof buf, "%s", spec);
    const char *want[32], *skip[32];
    int nw = 0, nsk = 0;
    char *save = NULL;
    for (char *t = strtok_r(buf, ", ", &save); t; t = strtok_r(NULL, ", ", &save)) {
        if (t[0] == '^' && nsk < 32)
            skip[nsk++] = t + 1;
        else if (strcmp(t, "auto") && t[0] != '^' && nw < 32)
            want[nw++] = t;
    }
    for (size_t i = 0; i < n_backends; i++) {
        const struct plx__backend *b = backends[i];
        int in = nw == 0;
        for (int j = 0; j < nw; j++)
            in |= !strcasecmp(want[j], b->name);
        for (int j = 0; j < nsk; j++)
            in &= !!strcasecmp(skip[j], b->name);
        size_t l = strlen(out);
        if (in && b->state == PLX_STATE_BROKEN && l < n)
            snprintf(out + l, n - l, "%s%s: broken: %s", l ? "; " : "", b->name, b->reason);
    }
}

void plx__loader_reset(void)
{
    /* The plugins stay mapped (never dlclose) and may keep their host
     * pointer, which lives inside the core's copy of the backend: the old
     * copies are kept, reachable, in the list of retired ones. */
    static struct plx__backend **retired;
    static size_t n_retired;
    pthread_mutex_lock(&mu);
    struct plx__backend **r = realloc(retired, (n_retired + n_backends + 1) * sizeof *r);
    if (r) {
        retired = r;
        for (size_t i = 0; i < n_backends; i++)
            retired[n_retired++] = backends[i];
    }
    free(backends);
    backends = NULL;
    n_backends = 0;
    discovered = 0;
    pthread_mutex_unlock(&mu);
}
