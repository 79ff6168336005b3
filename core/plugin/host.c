/* host.c - the services struct handed to every plugin (struct plx_host).
 * Everything a plugin may need from the process goes through here, so
 * plugins never print, read config files or allocate stores themselves. */
#include "host.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "error.h"
#include "loader.h"
#include "log.h"
#include "reduce.h"
#include "store.h"

static const struct plx__backend *backend_of(void *ctx)
{
    return ((const struct plx__host_ctx *)ctx)->be;
}

/* The log category: the backend, and the communicator an instance serves. */
static void host_log(void *ctx, int level, const char *fmt, ...)
{
    const struct plx__host_ctx *h = ctx;
    char cat[160];
    const char *name = h->be && h->be->name ? h->be->name : "plugin";
    if (h->comm)
        snprintf(cat, sizeof cat, "%s '%s'", name, h->comm);
    va_list ap;
    va_start(ap, fmt);
    plx__vlog(level, h->comm ? cat : name, fmt, ap);
    va_end(ap);
}

static int host_error(void *ctx, int status, const char *fmt, ...)
{
    (void)ctx;
    va_list ap;
    va_start(ap, fmt);
    plx__verr(status, fmt, ap);
    va_end(ap);
    return status;
}

static const char *host_last_error(void *ctx)
{
    (void)ctx;
    return plx_last_error();
}

static int no_store(void)
{
    return plx__err(PLX_ERR_INVALID_USAGE,
                    "no rendezvous store for this communicator: set MASTER_ADDR and MASTER_PORT, "
                    "or PLEXUS_INIT=tcp://host:port | file:///dir | mem://name");
}

static int host_store_set(struct plx_store *s, const char *key, const void *val, size_t len)
{
    return s ? plx__store_set(s, key, val, len) : no_store();
}

static int host_store_get(struct plx_store *s, const char *key, void **val, size_t *len, int64_t timeout_ms)
{
    return s ? plx__store_get(s, key, val, len, timeout_ms) : no_store();
}

static int host_store_add(struct plx_store *s, const char *key, int64_t delta, int64_t *result)
{
    return s ? plx__store_add(s, key, delta, result) : no_store();
}

static int host_store_wait(struct plx_store *s, const char *const *keys, size_t n, int64_t timeout_ms)
{
    return s ? plx__store_wait(s, keys, n, timeout_ms) : no_store();
}

static void host_free(void *p)
{
    free(p);
}

/* cfg NULL: the process layers alone. A plugin may pass the view its
 * comm_create got; the core checked every value in it against the keys. */
static int host_config_str(void *ctx, const struct plx_config *cfg, const char *key, const char **out)
{
    const struct plx__backend *b = backend_of(ctx);
    const char *v = plx__config_get_in(cfg, plx__config_section(cfg, b->name), key, NULL);
    for (const struct plx_key *k = b->keys; !v && k && k->key; k++)
        if (!strcmp(k->key, key))
            v = k->default_value;
    if (!v)
        return PLX_ERR_NOT_FOUND;
    *out = v;
    return 0;
}

static int host_config_int(void *ctx, const struct plx_config *cfg, const char *key, int64_t *out)
{
    const struct plx__backend *b = backend_of(ctx);
    return plx__config_number_in(cfg, plx__config_section(cfg, b->name), key, out);
}

static int host_config_bool(void *ctx, const struct plx_config *cfg, const char *key, int *out)
{
    int64_t v;
    int rc = host_config_int(ctx, cfg, key, &v);
    if (rc == 0)
        *out = v != 0;
    return rc;
}

void plx__host_init(struct plx_host *h, struct plx__host_ctx *ctx)
{
    *h = (struct plx_host){
        .struct_size = sizeof *h,
        .abi_minor = PLX_ABI_MINOR,
        .ctx = ctx,
        .log = host_log,
        .error = host_error,
        .config_get = plx__backend_config_get,
        .clock_ns = plx__clock_ns,
        .reduce = plx__reduce,
        .scale_div = plx__scale_div,
        .store_set = host_store_set,
        .store_get = host_store_get,
        .store_add = host_store_add,
        .store_wait = host_store_wait,
        .free = host_free,
        .config_str = host_config_str,
        .config_bool = host_config_bool,
        .config_int = host_config_int,
        .last_error = host_last_error,
    };
}
