/* save.c - the save protocol: rank 0 prepares PATH.tmp, every rank writes
 * its shard there, the ranks agree that all succeeded, rank 0 writes the
 * index and publishes the folder with one atomic rename (an exchange when a
 * previous checkpoint sits at PATH), and the ranks learn the outcome. A rank
 * that dies anywhere before the rename leaves PATH untouched: the others
 * fail in the next agreement instead of publishing. The asynchronous form
 * runs the same protocol from a thread over a private communicator. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ckpt.h"
#include "deadline.h"

PLX_API void plx_ckpt_item_init(struct plx_ckpt_item *it)
{
    memset(it, 0, sizeof *it);
    it->struct_size = sizeof *it;
}

PLX_API void plx_ckpt_options_init(struct plx_ckpt_options *o)
{
    memset(o, 0, sizeof *o);
    o->struct_size = sizeof *o;
    o->verify = 1;
    o->fsync = 1;
}

/* Every rank learns whether all succeeded; a rank that succeeded but sees
 * another's failure gets PLX_ERR_REMOTE naming the first failed rank. A lost
 * rank shows as this collective's own error. */
int plx__ckpt_agree(struct plx_comm *c, const char *what, int rc)
{
    if (!c)
        return rc;
    int me = plx_comm_rank(c);
    int32_t v[2] = {rc, rc ? me : INT32_MAX}, r[2];
    char mine[1024];
    snprintf(mine, sizeof mine, "%s", plx_last_error());
    int crc = plx_allreduce(c, v, r, 2, PLX_I32, PLX_MIN);
    if (crc) {
        plx_error_prefix("%s: ranks could not agree on the outcome: ", what);
        return rc ? plx_set_error(rc, "%s (and then: %s)", mine, plx_last_error()) : crc;
    }
    if (rc) {
        plx_set_error(rc, "%s", mine);
        return rc;
    }
    if (r[0])
        return plx_set_error(PLX_ERR_REMOTE, "%s: rank %d failed (its message is in its own error; worst status %s), so no "
                        "rank went on", what, (int)r[1], plx_err_name(r[0]));
    return 0;
}

/* Rank 0: PATH.tmp empty and present (a stale one from a crashed save is
 * removed if it holds only checkpoint files). */
static int prepare(const char *tmp)
{
    if (plx__ckpt_remove_dir(tmp) && errno != ENOENT)
        return plx_set_error(PLX_ERR_SYSTEM, "checkpoint save: cannot remove the stale %s: %s", tmp, strerror(errno));
    if (mkdir(tmp, 0755))
        return plx_set_error(PLX_ERR_SYSTEM, "checkpoint save: mkdir %s: %s", tmp, strerror(errno));
    return 0;
}

/* The parent folder of path, for fsync after the rename. */
static void parent_of(const char *path, char *out, size_t cap)
{
    snprintf(out, cap, "%s", path);
    char *s = strrchr(out, '/');
    if (!s)
        snprintf(out, cap, ".");
    else if (s == out)
        out[1] = 0;
    else
        *s = 0;
}

/* Rank 0: the atomic step. */
static int publish(const char *tmp, const char *path, int do_fsync)
{
    struct stat st;
    if (do_fsync && plx__ckpt_fsync_path(tmp))
        return plx_set_error(PLX_ERR_SYSTEM, "checkpoint save: fsync %s: %s", tmp, strerror(errno));
    if (stat(path, &st) == 0) {
        /* Swap the new folder in and the old one out in one step; then
         * remove the old one, now at tmp. */
        if (renameat2(AT_FDCWD, tmp, AT_FDCWD, path, RENAME_EXCHANGE))
            return plx_set_error(PLX_ERR_SYSTEM, "checkpoint save: exchanging %s with %s: %s", tmp, path, strerror(errno));
        if (plx__ckpt_remove_dir(tmp))
            plx_set_error(0, "checkpoint save: the previous checkpoint, now at %s, could not be removed", tmp);
    } else if (rename(tmp, path)) {
        return plx_set_error(PLX_ERR_SYSTEM, "checkpoint save: rename %s to %s: %s", tmp, path, strerror(errno));
    }
    char parent[4096];
    parent_of(path, parent, sizeof parent);
    if (do_fsync && plx__ckpt_fsync_path(parent))
        return plx_set_error(PLX_ERR_SYSTEM, "checkpoint save: fsync %s: %s", parent, strerror(errno));
    return 0;
}

static int check_items(const struct plx_ckpt_item *items, int n)
{
    if (n < 0 || (n && !items))
        return plx_set_error(PLX_ERR_INVALID_ARG, "checkpoint save: bad item list (%d items)", n);
    for (int i = 0; i < n; i++) {
        int rc = plx__ckpt_check_item("checkpoint save", &items[i]);
        if (rc)
            return rc;
        for (int j = 0; j < i; j++)
            if (!strcmp(items[i].name, items[j].name))
                return plx_set_error(PLX_ERR_INVALID_ARG, "checkpoint save: tensor '%s' is listed twice", items[i].name);
    }
    return 0;
}

static int save(struct plx_comm *c, const char *path, const struct plx_ckpt_item *items, int n, int do_fsync)
{
    int me = c ? plx_comm_rank(c) : 0, P = c ? plx_comm_size(c) : 1;
    char tmp[4096], file[4200], fname[64];
    if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp)
        return plx_set_error(PLX_ERR_INVALID_ARG, "checkpoint save: path too long");
    int rc = check_items(items, n);
    if (!rc && me == 0)
        rc = prepare(tmp);
    if ((rc = plx__ckpt_agree(c, "checkpoint save (prepare)", rc)))
        return rc;
    plx__ckpt_shard_name(fname, sizeof fname, me);
    snprintf(file, sizeof file, "%s/%s", tmp, fname);
    rc = plx__ckpt_write_shard(file, items, n, do_fsync);
    if ((rc = plx__ckpt_agree(c, "checkpoint save (write)", rc)))
        return rc;
    if (me == 0) {
        rc = plx__ckpt_write_index(tmp, P, do_fsync);
        if (!rc)
            rc = publish(tmp, path, do_fsync);
    }
    return plx__ckpt_agree(c, "checkpoint save (publish)", rc);
}

PLX_API int plx_ckpt_save(struct plx_comm *comm, const char *path, const struct plx_ckpt_item *items, int n,
                          const struct plx_ckpt_options *o)
{
    struct plx_ckpt_options opt;
    plx_ckpt_options_init(&opt);
    if (o)
        memcpy(&opt, o, o->struct_size < sizeof opt ? o->struct_size : sizeof opt);
    if (!path || !*path)
        return plx_set_error(PLX_ERR_INVALID_ARG, "plx_ckpt_save: no path");
    return save(comm, path, items, n, opt.fsync);
}

/* ---- asynchronous ---------------------------------------------------------- */

struct plx_ckpt_job {
    struct plx_comm *comm; /* private: split from the caller's */
    char *path;
    struct plx_ckpt_item *items;
    int n, do_fsync;
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int done, status; /* under mu */
    char msg[1024];   /* the thread's error detail, copied under mu */
};

static void *job_main(void *p)
{
    struct plx_ckpt_job *j = p;
    int rc = save(j->comm, j->path, j->items, j->n, j->do_fsync);
    pthread_mutex_lock(&j->mu);
    j->status = rc;
    snprintf(j->msg, sizeof j->msg, "%s", rc ? plx_last_error() : "");
    j->done = 1;
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
    return NULL;
}

static void job_free(struct plx_ckpt_job *j)
{
    for (int i = 0; j->items && i < j->n; i++) {
        free((void *)j->items[i].name);
        free(j->items[i].data);
    }
    free(j->items);
    free(j->path);
    plx_comm_destroy(j->comm);
    pthread_mutex_destroy(&j->mu);
    pthread_cond_destroy(&j->cv);
    free(j);
}

PLX_API int plx_ckpt_save_async(struct plx_comm *comm, const char *path, const struct plx_ckpt_item *items, int n,
                                const struct plx_ckpt_options *o, struct plx_ckpt_job **job)
{
    struct plx_ckpt_options opt;
    plx_ckpt_options_init(&opt);
    if (o)
        memcpy(&opt, o, o->struct_size < sizeof opt ? o->struct_size : sizeof opt);
    if (!path || !*path || !job)
        return plx_set_error(PLX_ERR_INVALID_ARG, "plx_ckpt_save_async: no path or job");
    int rc = check_items(items, n);
    struct plx_ckpt_job *j = calloc(1, sizeof *j);
    if (!rc && !j)
        rc = plx_set_error(PLX_ERR_NOMEM, "plx_ckpt_save_async: out of memory");
    if (j) {
        pthread_mutex_init(&j->mu, NULL);
        pthread_condattr_t ca;
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* plx_ckpt_wait's deadline */
        pthread_cond_init(&j->cv, &ca);
        pthread_condattr_destroy(&ca);
        j->path = strdup(path);
        j->items = calloc((size_t)(n ? n : 1), sizeof *j->items);
        j->do_fsync = opt.fsync;
        if (!rc && (!j->path || !j->items))
            rc = plx_set_error(PLX_ERR_NOMEM, "plx_ckpt_save_async: out of memory");
    }
    /* Snapshot: the caller may change its buffers as soon as we return. */
    for (int i = 0; !rc && i < n; i++) {
        size_t bytes = items[i].count * plx_dtype_size(items[i].dtype);
        j->items[i] = items[i];
        j->items[i].name = strdup(items[i].name);
        j->items[i].data = malloc(bytes ? bytes : 1);
        j->n = i + 1;
        if (!j->items[i].name || !j->items[i].data)
            rc = plx_set_error(PLX_ERR_NOMEM, "plx_ckpt_save_async: out of memory for a copy of '%s'", items[i].name);
        else
            memcpy(j->items[i].data, items[i].data, bytes);
    }
    /* Every rank must take part in the split, so agree first. */
    if (comm) {
        if (!(rc = plx__ckpt_agree(comm, "plx_ckpt_save_async", rc)))
            rc = plx_comm_split(comm, 0, plx_comm_rank(comm), &j->comm);
    }
    if (!rc && pthread_create(&j->th, NULL, job_main, j))
        rc = plx_set_error(PLX_ERR_SYSTEM, "plx_ckpt_save_async: cannot start the writer thread");
    if (rc) {
        if (j)
            job_free(j);
        return rc;
    }
    *job = j;
    return 0;
}

PLX_API int plx_ckpt_wait(struct plx_ckpt_job *j, int64_t timeout_ms)
{
    if (!j)
        return plx_set_error(PLX_ERR_INVALID_ARG, "plx_ckpt_wait: no job");
    uint64_t end = plx__s_deadline(timeout_ms, PLX_TIMEOUT_INFINITE); /* a save has no configured limit */
    struct timespec dl = plx__s_timespec(end);
    pthread_mutex_lock(&j->mu);
    while (!j->done) {
        if (end == PLX_DEADLINE_NEVER)
            pthread_cond_wait(&j->cv, &j->mu);
        else if (pthread_cond_timedwait(&j->cv, &j->mu, &dl) == ETIMEDOUT)
            break;
    }
    int done = j->done, rc = j->status;
    char msg[sizeof j->msg];
    memcpy(msg, j->msg, sizeof msg);
    pthread_mutex_unlock(&j->mu);
    if (!done)
        return plx_set_error(PLX_ERR_TIMEOUT, "plx_ckpt_wait: the save to %s did not finish in %lld ms", j->path,
                        (long long)timeout_ms);
    pthread_join(j->th, NULL);
    job_free(j);
    return rc ? plx_set_error(rc, "%s", msg) : 0;
}
