/* loader.h - find backends from drop-ins, dlopen them, negotiate the ABI,
 * probe, and keep state + reason. One broken plugin never stops the others.
 * Plugins are never dlclose'd. Stability: internal. */
#ifndef PLX_CORE_LOADER_H
#define PLX_CORE_LOADER_H

#include <stddef.h>
#include <stdint.h>

#include "host.h"
#include "plexus/backend.h"
#include "plexus/info.h"

/* The core's own copy of a backend. ops is zero-filled beyond the plugin's
 * struct_size, so an absent field reads as NULL/0 (the documented default). */
struct plx__backend {
    char *name;
    char *library;
    char *dropin;
    int priority;
    int state;          /* enum plx_backend_state */
    char reason[512];
    uint32_t abi_major, abi_minor; /* negotiated */
    struct plx_backend ops;
    /* Its "plexus.sim" extension, zero-filled beyond what it gave (all NULL
     * for a backend without one); from the reserved table slots for a
     * plugin of ABI 1.6 to 1.10, which had the hooks there. */
    struct plx_ext_sim sim;
    struct plx_caps caps;           /* static caps */
    struct plx_host host;           /* host.ctx == &host_ctx */
    struct plx__host_ctx host_ctx;  /* this backend, no communicator */
    const struct plx_key *keys;     /* typed (ABI 1.3), or an older plugin's params as strings */
    char *alias;                    /* [name] alias: the backends it stands for, or NULL */
    struct plx_key *own_keys;       /* keys made from an older plugin's params */
    char *own_description;          /* an alias's "alias of X here: ..." */
    struct plx__backend *target;    /* an alias: the one it stands for here, or NULL */
};

/* Drop from k (b's caps, static or a communicator's) what b's minor cannot
 * mean: the bitwise ops of ABI 1.13 for an older plugin, whose mask (such
 * as PLX_BIT(PLX_REDOP_COUNT) - 1, rebuilt against today's plexus.h) is not
 * a promise about ops its kernels never knew. The core runs those on its
 * generic algorithms instead. */
void plx__caps_for_minor(const struct plx__backend *b, struct plx_caps *k);

/* The most bytes of request a plugin may ask the core to hold (ABI 1.5). */
#define PLX__REQ_SIZE_MAX 4096

/* Discover, load and probe every declared backend (once per process). */
int plx__loader_discover(void);
size_t plx__loader_count(void);
struct plx__backend *plx__loader_at(size_t i);
struct plx__backend *plx__loader_find(const char *name);
/* Choose the backend for spec ("auto", "a,b", "^c", NULL = [core] backend
 * of the process layers / PLEXUS_BACKEND). Error texts: unknown name with "did you mean 'x'?";
 * explicit but unusable: "backend 'x' (file F): state: reason". */
int plx__loader_select(const char *spec, struct plx__backend **out);
/* The next choice for spec after `after` (which refused the communicator
 * with PLX_ERR_UNAVAILABLE, e.g. shm when the ranks span hosts): the next
 * usable one in priority order for auto, in list order for a list; a
 * single explicit name has no next (PLX_ERR_UNAVAILABLE). */
/* spec NULL reads [core] backend through v (NULL: the process layers). */
int plx__loader_select_after(const struct plx_config *v, const char *spec, const struct plx__backend *after,
                             struct plx__backend **out);
/* Where a job's ranks are, as its launcher says: auto's order depends on it. */
enum { PLX__PLACE_UNKNOWN, PLX__PLACE_ONE_HOST, PLX__PLACE_HOSTS };
/* plx__loader_select_after for a job placed so (auto: merit.c's order);
 * why (wn bytes, may be NULL) gets the choice in words. */
int plx__loader_select_placed(const struct plx_config *v, const char *spec, const struct plx__backend *after,
                              int place, struct plx__backend **out, char *why, size_t wn);
/* merit.c: every backend in the order auto tries them for place (*n of
 * them into order, which holds plx__loader_count()); PLX_ERR_CONFIG for a
 * [core] prefer that names no backend. */
int plx__merit_order(const struct plx_config *v, int place, struct plx__backend **order, size_t *n);
/* Why auto chose chosen from order, in words. */
void plx__merit_explain(const struct plx_config *v, int place, const struct plx__backend *chosen,
                        struct plx__backend *const *order, size_t n, char *why, size_t wn);

/* Append to out (n bytes, "; " between) "NAME: broken: REASON" for every
 * backend spec would choose from (NULL: [core] backend through v) that
 * failed to load or probe: a configuration that broke one (a wrong [tcp]
 * ifname) shows in the error of a job that found no backend. */
void plx__loader_broken_in(const struct plx_config *v, const char *spec, char *out, size_t n);

/* host->config_get for ctx (a struct plx__host_ctx): the backend's own
 * section, through an instance's view; through the process-wide table,
 * the view of the comm_create / comm_split running on this thread (below),
 * else the process layers. */
const char *plx__backend_config_get(void *ctx, const char *key);
/* The backend's comm_create and comm_split (a NULL: not taking part), with
 * a->config the view an old plugin's config_get reads during the call. */
int plx__backend_comm_create(const struct plx__backend *b, const struct plx_comm_args *a, void **out);
int plx__backend_comm_split(const struct plx__backend *b, void *bc, int color, int key,
                            const struct plx_comm_args *a, void **out);
/* ABI 1.8's comm_shrink, the config of the new communicator in force meanwhile. */
int plx__backend_comm_shrink(const struct plx__backend *b, void *bc, unsigned char *alive, int agreed,
                             const struct plx_comm_args *a, void **out);

/* Tests: forget everything (plugins stay mapped). */
void plx__loader_reset(void);

#endif
