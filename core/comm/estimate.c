/* estimate.c - plx_comm_estimate: a collective's modelled time from the
 * table of [core] estimates (core/algo/estimates.h).
 *
 * The table is read once per process and file: the last one read stays,
 * keyed by its path and the file's identity (device, inode, size, change
 * time), so a file written anew is read anew and every other call only
 * looks. Lookups are rare (a scheduler's estimation pass, not every
 * collective), so one lock serialises them. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "comm.h"
#include "config.h"
#include "error.h"
#include "estimates.h"

struct cached {
    int loaded;
    char path[4096];
    struct stat st;
    struct plx__estimates t;
};

static pthread_mutex_t cache_mu = PTHREAD_MUTEX_INITIALIZER;
static struct cached cache;

static int same_file(const struct stat *a, const struct stat *b)
{
    return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_size == b->st_size &&
           a->st_ctim.tv_sec == b->st_ctim.tv_sec && a->st_ctim.tv_nsec == b->st_ctim.tv_nsec;
}

/* The table of path, read unless the cache holds it; NULL with the error
 * recorded (PLX_ERR_CONFIG: "[core] estimates: path:line: ..."). Called
 * with cache_mu held. */
static const struct plx__estimates *table_of(const char *path, int *rc)
{
    struct stat st;
    if (stat(path, &st) != 0)
        memset(&st, 0, sizeof st); /* the load says why it cannot be read */
    if (cache.loaded && !strcmp(cache.path, path) && same_file(&cache.st, &st))
        return &cache.t;
    plx__estimates_finish(&cache.t);
    cache.loaded = 0;
    char err[600];
    if (plx__estimates_load(&cache.t, path, err, sizeof err) != 0) {
        plx__estimates_finish(&cache.t);
        *rc = plx__err(PLX_ERR_CONFIG, "plx_comm_estimate: [core] estimates: %s", err);
        return NULL;
    }
    snprintf(cache.path, sizeof cache.path, "%s", path);
    cache.st = st;
    cache.loaded = 1;
    return &cache.t;
}

PLX_API int plx_comm_estimate(const struct plx_comm *comm, int coll, size_t bytes, double *seconds)
{
    if (!comm || !seconds || coll < 0 || coll >= PLX_COLL_COUNT)
        return plx__err(PLX_ERR_INVALID_ARG, "plx_comm_estimate: %s",
                        !comm ? "comm is NULL" : !seconds ? "seconds is NULL" : "no such collective");
    const char *path = plx__config_get_in(comm->config, "core", "estimates", NULL);
    if (!path || !*path)
        return plx__err(PLX_ERR_UNSUPPORTED, "plx_comm_estimate: no [core] estimates table is configured "
                                             "(plexus-whatif --emit-estimates writes one from a model)");
    const char *backend = plx_comm_backend(comm);
    int rc = 0;
    char why[600];
    pthread_mutex_lock(&cache_mu);
    const struct plx__estimates *t = table_of(path, &rc);
    if (t && plx__estimates_lookup(t, backend, coll, comm->size, bytes, seconds, why, sizeof why) != 0)
        rc = plx__err(PLX_ERR_UNSUPPORTED, "plx_comm_estimate: %s", why);
    pthread_mutex_unlock(&cache_mu);
    return rc;
}
