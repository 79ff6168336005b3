/* info.c - the public introspection API (plexus/info.h) over the loader
 * and the config. */
#include <pthread.h>
#include <stddef.h>
#include <string.h>

#include "config.h"
#include "error.h"
#include "loader.h"
#include "plexus/info.h"

/* The options of the last plx_backends_discover call: what plx_config_entry
 * lists over the process layers (a tool's view, owned by no communicator). */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct plx_config *listed;

PLX_API int plx_backends_discover(const struct plx_comm_options *opt)
{
    int rc = plx__config_load();
    if (rc == 0)
        rc = plx__loader_discover();
    struct plx_config *v = NULL;
    if (rc == 0 && (rc = plx__config_open(opt, &v)) == 0) {
        pthread_mutex_lock(&mu);
        plx__config_release(listed);
        listed = v;
        pthread_mutex_unlock(&mu);
    }
    return rc;
}

PLX_API size_t plx_backend_count(void)
{
    return plx__loader_count();
}

PLX_API const char *plx_backend_state_name(int state)
{
    static const char *const names[] = {"discovered", "loaded", "usable", "unavailable", "broken", "disabled"};
    return state >= 0 && state <= PLX_STATE_DISABLED ? names[state] : "?";
}

PLX_API int plx_backend_info(size_t i, struct plx_backend_info *out)
{
    const struct plx__backend *b = plx__loader_at(i);
    if (!b || !out || out->struct_size < offsetof(struct plx_backend_info, n_params))
        return plx__err(PLX_ERR_INVALID_ARG, "plx_backend_info: no backend %zu, or out too small", i);
    struct plx_backend_info info = {
        .struct_size = out->struct_size,
        .name = b->name,
        .state = b->state,
        .reason = b->reason,
        .library = b->library,
        .dropin = b->dropin,
        .priority = b->priority,
        .abi_major = b->abi_major,
        .abi_minor = b->abi_minor,
        .version = b->ops.version ? b->ops.version : "",
        .description = b->ops.description ? b->ops.description : "",
        .cap_flags = b->caps.flags,
        .collectives = b->caps.collectives,
        .dtypes = b->caps.dtypes,
        .redops = b->caps.redops,
        .mem_kinds = b->caps.mem_kinds,
        .prepared = b->ops.coll_prepare != NULL, /* the loader keeps it only with its two partners, at 1.12+ */
    };
    for (const struct plx_key *k = b->keys; k && k->key; k++)
        info.n_params++;
    /* Caller-sized: write no more than it asked for. */
    size_t n = out->struct_size < sizeof info ? out->struct_size : sizeof info;
    memcpy(out, &info, n);
    return 0;
}

PLX_API int plx_backend_find(const char *name)
{
    for (size_t i = 0; name && i < plx__loader_count(); i++)
        if (!strcmp(plx__loader_at(i)->name, name))
            return (int)i;
    struct plx__backend *b;
    int rc = plx__loader_select(name ? name : "", &b); /* for the "did you mean" text */
    return rc == PLX_ERR_NOT_FOUND ? rc : plx__err(PLX_ERR_NOT_FOUND, "unknown backend '%s'", name ? name : "");
}

PLX_API int plx_backend_param(size_t i, size_t j, const char **key, const char **def, const char **help)
{
    const struct plx__backend *b = plx__loader_at(i);
    size_t n = 0;
    for (const struct plx_key *k = b ? b->keys : NULL; k && k->key; k++, n++)
        if (n == j) {
            *key = k->key;
            *def = k->default_value ? k->default_value : "";
            *help = k->help ? k->help : "";
            return 0;
        }
    return plx__err(PLX_ERR_INVALID_ARG, "plx_backend_param: no parameter %zu of backend %zu", j, i);
}

/* The placement-aware choice lives in core/comm/backend_describe.c, which
 * reads the launcher's variables. */
PLX_API int plx_backend_select(const char *spec)
{
    char why[8];
    return plx_backend_select_why(spec, why, sizeof why);
}

PLX_API size_t plx_config_count(void)
{
    pthread_mutex_lock(&mu);
    size_t n = plx__config_entry_count(listed);
    pthread_mutex_unlock(&mu);
    return n;
}

PLX_API int plx_config_entry(size_t i, struct plx_config_entry *out)
{
    /* Caller-sized: any struct_size from the first version's on, and only
     * the fields that fit are written (append-only, as every public struct). */
    const size_t first = offsetof(struct plx_config_entry, help) + sizeof out->help;
    if (!out || out->struct_size < first)
        return plx__err(PLX_ERR_INVALID_ARG, "plx_config_entry: out is NULL or its struct_size below %zu", first);
    struct plx__config_entry e;
    pthread_mutex_lock(&mu);
    int rc = plx__config_entry_at(listed, i, &e);
    pthread_mutex_unlock(&mu);
    if (rc)
        return plx__err(rc, "plx_config_entry: no entry %zu", i);
    struct plx_config_entry full = {
        .struct_size = out->struct_size,
        .section = e.section,
        .key = e.key,
        .value = e.value,
        .origin = e.origin,
        .help = e.help,
        .type = e.type,
    };
    memcpy(out, &full, out->struct_size < sizeof full ? out->struct_size : sizeof full);
    return 0;
}
