/* grow.c - new processes join a running job. The ranks of a communicator
 * call plx_comm_grow at a point they choose; each newcomer calls
 * plx_comm_join with the job's store and the communicator's name. They meet
 * through the store: a newcomer takes a seat (an atomic counter), rank 0 of
 * the communicator publishes an offer for the next seats (where the new
 * communicator's keys are, its size), and every one of them builds the new
 * communicator there: the old ranks keep their numbers, the newcomers
 * follow in the order they took their seats. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "comm.h"
#include "elastic.h"
#include "config.h"
#include "error.h"
#include "log.h"
#include "store.h"

/* Keys of the grows of communicators whose first name part is root, in the
 * job's store without any communicator's prefix: a newcomer knows no more. */
static void grow_key(char *out, size_t n, const char *name, const char *what, long long i)
{
    size_t root = strcspn(name, "/");
    if (i >= 0)
        snprintf(out, n, "plexus-grow/%.*s/%s/%lld", (int)root, name, what, i);
    else
        snprintf(out, n, "plexus-grow/%.*s/%s", (int)root, name, what);
}

/* Rank 0's part: offer the next (size - old) seats to the newcomers. */
static int offer(struct plx_comm *c, int size, const char *name, const char *root)
{
    char key[600], val[1600];
    int64_t end = 0, g = 0;
    grow_key(key, sizeof key, c->name, "granted", -1);
    int rc = plx__store_add(c->base_store, key, size - c->size, &end);
    grow_key(key, sizeof key, c->name, "offers", -1);
    if (rc == 0)
        rc = plx__store_add(c->base_store, key, 1, &g);
    int len = snprintf(val, sizeof val, "%lld %d %d\n%s\n%s", (long long)(end - (size - c->size) + 1), c->size, size,
                       name, root);
    grow_key(key, sizeof key, c->name, "offer", (long long)g);
    if (rc == 0)
        rc = plx__store_set(c->base_store, key, val, (size_t)len);
    return rc;
}

PLX_API int plx_comm_grow(struct plx_comm *c, int size, struct plx_comm **out)
{
    plx__err_clear();
    if (!c || !out)
        return plx__err(PLX_ERR_INVALID_ARG, "plx_comm_grow: comm or out is NULL");
    *out = NULL;
    if (size <= c->size)
        return plx__err(PLX_ERR_INVALID_ARG, "plx_comm_grow on '%s': new size %d is not above its size %d", c->name,
                        size, c->size);
    int rc = plx__rebuild_refusal(c, "plx_comm_grow");
    if (rc != 0)
        return rc;
    unsigned long long epoch = (unsigned long long)c->rebuild_seq++;
    char name[512], root[512], step[64];
    snprintf(step, sizeof step, "/grow%llu", epoch);
    plx__child_name(name, sizeof name, c->name, step);
    plx__child_key_root(root, sizeof root, c->key_root, step);
    if (c->rank == 0 && (rc = offer(c, size, name, root)) != 0) {
        plx__err_prefix("plx_comm_grow on '%s': offering seats to newcomers: ", c->name);
        return rc;
    }
    struct plx__rebuild rb = {
        .name = name, .key_root = root, .rank = c->rank, .size = size, .be = c->be, .config = c->config,
        .base_store = c->base_store, .timeout_ms = c->timeout_ms, .create_ms = c->timeout_ms,
    };
    if ((rc = plx__comm_rebuild(c, &rb, out)) != 0) {
        plx__err_prefix("plx_comm_grow(rank %d of '%s' to %d ranks): ", c->rank, c->name, size);
        return rc;
    }
    plx__log(PLX_LOG_INFO, "core", "comm '%s': rank %d grew to '%s' of %d ranks", c->name, c->rank, name, size);
    return 0;
}

struct seat_offer {
    long long first;
    int old_size, size;
    char name[512], root[1024];
};

/* Read offers from the first on until one covers seat. */
static int find_offer(struct plx__job *job, long long seat, uint64_t deadline_ns, struct seat_offer *o)
{
    for (long long g = 1;; g++) {
        char key[600];
        void *val = NULL;
        size_t len = 0;
        grow_key(key, sizeof key, job->name, "offer", g);
        int rc = plx__store_get(job->base_store, key, &val, &len, plx__ms_left(deadline_ns));
        if (rc != 0) {
            plx__err_prefix("no communicator '%s' offered seat %lld to a newcomer within the timeout: ", job->name,
                            seat);
            return rc;
        }
        char *text = calloc(1, len + 1);
        if (text)
            memcpy(text, val, len);
        free(val);
        int ok = text && sscanf(text, "%lld %d %d", &o->first, &o->old_size, &o->size) == 3;
        char *name = text ? strchr(text, '\n') : NULL;
        char *root = name ? strchr(name + 1, '\n') : NULL;
        if (!ok || !root) {
            free(text);
            return plx__err(PLX_ERR_PROTOCOL, "plx_comm_join: offer %lld of '%s' in the store is malformed", g,
                            job->name);
        }
        *root = '\0';
        snprintf(o->name, sizeof o->name, "%s", name + 1);
        snprintf(o->root, sizeof o->root, "%s", root + 1);
        free(text);
        if (seat >= o->first && seat < o->first + (o->size - o->old_size))
            return 0;
    }
}

PLX_API int plx_comm_join(const struct plx_comm_options *opt, struct plx_comm **out)
{
    plx__err_clear();
    if (!out)
        return plx__err(PLX_ERR_INVALID_ARG, "plx_comm_join: out is NULL");
    *out = NULL;
    struct plx__job job;
    int rc = plx__comm_open_job(opt, &job);
    if (rc != 0) {
        plx__err_prefix("plx_comm_join: ");
        return rc;
    }
    uint64_t deadline = plx__deadline_ms(job.timeout_ms);
    char key[600];
    int64_t seat = 0;
    struct seat_offer o;
    grow_key(key, sizeof key, job.name, "seats", -1);
    if ((rc = plx__store_add(job.base_store, key, 1, &seat)) == 0 && (rc = find_offer(&job, seat, deadline, &o)) == 0) {
        struct plx__rebuild rb = {
            .name = o.name, .key_root = o.root, .rank = o.old_size + (int)(seat - o.first), .size = o.size,
            .be = job.be, .config = job.config, .base_store = job.base_store, .timeout_ms = job.timeout_ms,
            .create_ms = plx__ms_left(deadline),
        };
        rc = plx__comm_rebuild(NULL, &rb, out);
    }
    plx__config_release(job.config);
    plx__store_release(job.base_store);
    if (rc != 0)
        plx__err_prefix("plx_comm_join(communicator '%s'): ", job.name);
    return rc;
}
