/* symmetric.c - registered (symmetric) buffers: plx_mem_alloc on shm, and
 * the collectives that run straight on them.
 *
 * An allocation is one POSIX shared-memory object holding every rank's
 * buffer, slot r for rank r (bytes rounded up to a page), mapped whole by
 * every rank of the communicator: a rank reaches a peer's buffer at the
 * same offset in the peer's slot. Rank 0 creates the object and publishes
 * its name through the communicator's store; the others map it and say so;
 * rank 0 then unlinks the name, so the memory lives exactly as long as some
 * rank maps it (mem_free and a process's exit unmap).
 *
 * allreduce, when every rank's send and receive buffers lie at the same
 * offsets of the same allocations: after a barrier (every input is ready),
 * each rank reduces its slice of all ranks' inputs, a cache-sized piece at
 * a time, and writes the piece into all ranks' outputs; a second barrier
 * (every output is written, no input is read any more) ends it. Every input
 * byte is read once and every output byte written once: no staging copy.
 * Slices and the order of each element's reduction are those of coll.c's
 * allreduce on ordinary buffers (rounds of a slot, slice q of a round
 * reduced from rank q on), so both give the same bits. Allreduces up to
 * small_bytes stay on coll.c's one phase: one copy and one barrier cost
 * less than a second barrier. In place works:
 * a piece is read whole before any output of it is written, and only its
 * rank touches it.
 *
 * Agreement is checked: each rank publishes which allocation and offset its
 * buffers have (the slot header's off and len), and every rank compares the
 * peers' headers with its own before reading anything, so ranks that pass
 * different buffers, or a rank whose buffers are not registered, fail with
 * PLX_ERR_PROTOCOL instead of reading the wrong memory. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "shm.h"

#define TOKEN_SHIFT 40          /* a buffer's token: allocation id << 40 | offset in the slot */

struct shm_sym_buf {
    struct shm_sym_buf *next;
    uint64_t id;       /* same on every rank: allocations are collective, in order */
    char *base;        /* the mapping: slot r at base + r * slot */
    size_t slot;       /* bytes per rank, page-rounded */
    size_t bytes;      /* what the caller asked for */
};

struct shm_sym {
    pthread_mutex_t mu; /* bufs: allocations and frees against a collective's lookups */
    struct shm_sym_buf *bufs;
    uint64_t next_id;
    void *piece; /* SHM_REDUCE_PIECE_BYTES: the piece being reduced */
};

static struct shm_sym *sym_state(struct shm_comm *c)
{
    if (!c->sym) {
        struct shm_sym *s = calloc(1, sizeof *s);
        if (!s || posix_memalign(&s->piece, 64, SHM_REDUCE_PIECE_BYTES) != 0) {
            free(s);
            return NULL;
        }
        pthread_mutex_init(&s->mu, NULL);
        c->sym = s;
    }
    return c->sym;
}

static int store_put(struct shm_comm *c, const char *key, const char *val)
{
    int rc = c->host->store_set(c->store, key, val, strlen(val) + 1);
    return rc ? plx_plugin_error(c->host, rc, "shm: plx_mem_alloc: publishing '%s' failed", key) : 0;
}

/* The string at key (NUL-terminated into out), waiting up to the timeout. */
static int store_fetch(struct shm_comm *c, const char *key, char *out, size_t len, const char *who)
{
    void *v = NULL;
    size_t n = 0;
    int rc = c->host->store_get(c->store, key, &v, &n, c->timeout_ms);
    if (rc)
        return plx_plugin_error(c->host, rc, "shm: plx_mem_alloc: %s never answered (waited %lld ms for '%s')", who,
                                (long long)c->timeout_ms, key);
    snprintf(out, len, "%.*s", (int)(n && n <= len ? n - 1 : (n ? len - 1 : 0)), (const char *)v);
    c->host->free(v);
    return 0;
}

/* Rank 0: create, size and map the object; its name into name, or what
 * failed into why. */
static int create_object(size_t total, char *name, size_t len, char **base, char *why, size_t wlen)
{
    unsigned char rnd[8];
    if (getentropy(rnd, sizeof rnd) != 0) {
        snprintf(why, wlen, "getentropy failed: %s", strerror(errno));
        return PLX_ERR_SYSTEM;
    }
    int at = snprintf(name, len, "/plexus-sym-%d-", (int)getpid());
    for (size_t i = 0; i < sizeof rnd; i++)
        at += snprintf(name + at, len - (size_t)at, "%02x", rnd[i]);
    int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
        snprintf(why, wlen, "shm_open(%s) failed: %s", name, strerror(errno));
        return PLX_ERR_SYSTEM;
    }
    int rc = 0;
    void *p = MAP_FAILED;
    if (ftruncate(fd, (off_t)total) != 0) {
        snprintf(why, wlen, "sizing %s to %zu bytes failed: %s", name, total, strerror(errno));
        rc = PLX_ERR_NOMEM;
    } else if ((p = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) == MAP_FAILED) {
        snprintf(why, wlen, "mapping %zu bytes failed: %s", total, strerror(errno));
        rc = PLX_ERR_NOMEM;
    } else {
        *base = p;
    }
    close(fd);
    if (rc)
        shm_unlink(name);
    return rc;
}

/* Other ranks: map rank 0's object, which must be exactly total bytes. */
static int open_object(const char *name, size_t total, char **base, char *why, size_t len)
{
    int fd = shm_open(name, O_RDWR | O_CLOEXEC, 0);
    if (fd < 0) {
        snprintf(why, len, "shm_open(%s) failed: %s", name, strerror(errno));
        return -1;
    }
    struct stat st;
    void *p = MAP_FAILED;
    if (fstat(fd, &st) != 0 || (size_t)st.st_size != total)
        snprintf(why, len, "%s is not %zu bytes", name, total);
    else if ((p = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) == MAP_FAILED)
        snprintf(why, len, "mapping %zu bytes failed: %s", total, strerror(errno));
    close(fd);
    if (p == MAP_FAILED)
        return -1;
    *base = p;
    return 0;
}

/* Rank 0's part of plx_mem_alloc: create the object under key's name,
 * collect every rank's answer, publish the verdict (key grows by it, klen
 * bytes). *base is set once the object is mapped, also on a later failure. */
static int lead_alloc(struct shm_comm *c, size_t bytes, size_t total, char *key, size_t klen, char **base)
{
    char val[256], name[96], why[200] = "";
    int rc = create_object(total, name, sizeof name, base, why, sizeof why);
    if (rc != 0) {
        snprintf(val, sizeof val, "error %s", why);
        store_put(c, key, val); /* the others fail with rank 0's reason instead of waiting */
        return plx_plugin_error(c->host, rc, "shm: plx_mem_alloc(%zu bytes): %s", bytes, why);
    }
    snprintf(val, sizeof val, "%zu %s", bytes, name);
    if ((rc = store_put(c, key, val)) != 0) {
        shm_unlink(name);
        return rc;
    }
    /* every rank says whether it mapped the object, then the name goes */
    int bad = 0;
    for (int r = 1; r < c->size && !rc; r++) {
        char rkey[112], who[32];
        snprintf(rkey, sizeof rkey, "%s/%d", key, r);
        snprintf(who, sizeof who, "rank %d", r);
        if ((rc = store_fetch(c, rkey, val, sizeof val, who)) == 0 && strcmp(val, "ok") != 0) {
            snprintf(why, sizeof why, "rank %d: %.150s", r, val);
            bad = r;
        }
    }
    shm_unlink(name);
    snprintf(key + strlen(key), klen - strlen(key), "/verdict");
    if (rc) {
        store_put(c, key, "a rank did not answer rank 0");
        return rc;
    }
    if ((rc = store_put(c, key, bad ? why : "ok")) != 0)
        return rc;
    if (bad)
        return plx_plugin_error(c->host, PLX_ERR_SYSTEM, "shm: plx_mem_alloc(%zu bytes): %s", bytes, why);
    return 0;
}

/* Another rank's part: map the object rank 0 named under key, answer,
 * and take rank 0's verdict. */
static int follow_alloc(struct shm_comm *c, size_t bytes, size_t total, char *key, size_t klen, char **base)
{
    char val[256], name[96], why[200] = "";
    int rc = store_fetch(c, key, val, sizeof val, "rank 0");
    if (rc != 0)
        return rc;
    size_t theirs = 0;
    if (!strncmp(val, "error ", 6))
        return plx_plugin_error(c->host, PLX_ERR_REMOTE, "shm: plx_mem_alloc(%zu bytes): rank 0 failed: %s", bytes,
                                val + 6);
    if (sscanf(val, "%zu %95s", &theirs, name) != 2 || theirs != bytes)
        snprintf(why, sizeof why, "rank %d asked for %zu bytes, rank 0 for '%.100s'", c->rank, bytes, val);
    else
        open_object(name, total, base, why, sizeof why);
    char rkey[112];
    snprintf(rkey, sizeof rkey, "%s/%d", key, c->rank);
    if ((rc = store_put(c, rkey, why[0] ? why : "ok")) != 0)
        return rc;
    snprintf(key + strlen(key), klen - strlen(key), "/verdict");
    if ((rc = store_fetch(c, key, val, sizeof val, "rank 0")) != 0)
        return rc;
    if (why[0] || strcmp(val, "ok") != 0)
        return plx_plugin_error(c->host, PLX_ERR_SYSTEM, "shm: plx_mem_alloc(%zu bytes): %s", bytes,
                                why[0] ? why : val);
    return 0;
}

int shm__sym_alloc(struct shm_comm *c, size_t bytes, void **ptr)
{
    struct shm_sym *s = sym_state(c);
    if (!s)
        return plx_plugin_error(c->host, PLX_ERR_NOMEM, "shm: plx_mem_alloc: out of memory");
    size_t P = (size_t)c->size, slot = (bytes + 4095) / 4096 * 4096;
    if (!bytes || slot < bytes || slot > (SIZE_MAX / 2) / P || slot >= (size_t)1 << TOKEN_SHIFT)
        return plx_plugin_error(c->host, PLX_ERR_INVALID_ARG, "shm: plx_mem_alloc: %zu bytes on %zu ranks is too much",
                                bytes, P);
    size_t total = slot * P;
    uint64_t id = ++s->next_id;
    char key[96];
    char *base = NULL;
    snprintf(key, sizeof key, "shm/sym/%llu", (unsigned long long)id);
    int rc = c->rank == 0 ? lead_alloc(c, bytes, total, key, sizeof key, &base)
                          : follow_alloc(c, bytes, total, key, sizeof key, &base);
    struct shm_sym_buf *b = NULL;
    if (rc == 0 && !(b = calloc(1, sizeof *b)))
        rc = plx_plugin_error(c->host, PLX_ERR_NOMEM, "shm: plx_mem_alloc: out of memory");
    if (rc) {
        if (base)
            munmap(base, total);
        return rc;
    }
    *b = (struct shm_sym_buf){.id = id, .base = base, .slot = slot, .bytes = bytes};
    pthread_mutex_lock(&s->mu);
    b->next = s->bufs;
    s->bufs = b;
    pthread_mutex_unlock(&s->mu);
    *ptr = base + (size_t)c->rank * slot;
    return 0;
}

int shm__sym_free(struct shm_comm *c, void *ptr)
{
    struct shm_sym *s = c->sym;
    struct shm_sym_buf *b = NULL, **at;
    if (s) {
        pthread_mutex_lock(&s->mu);
        for (at = &s->bufs; *at; at = &(*at)->next)
            if ((*at)->base + (size_t)c->rank * (*at)->slot == (char *)ptr) {
                b = *at;
                *at = b->next;
                break;
            }
        pthread_mutex_unlock(&s->mu);
    }
    if (!b)
        return plx_plugin_error(c->host, PLX_ERR_INVALID_ARG, "shm: plx_mem_free: %p is not registered memory", ptr);
    munmap(b->base, b->slot * (size_t)c->size);
    free(b);
    return 0;
}

void shm__sym_destroy(struct shm_comm *c)
{
    struct shm_sym *s = c->sym;
    if (!s)
        return;
    while (s->bufs) {
        struct shm_sym_buf *b = s->bufs;
        s->bufs = b->next;
        munmap(b->base, b->slot * (size_t)c->size);
        free(b);
    }
    pthread_mutex_destroy(&s->mu);
    free(s->piece);
    free(s);
    c->sym = NULL;
}

/* The allocation [p, p + len) lies in (this rank's slot), or NULL; its
 * token into *token. Called with s->mu held. */
static const struct shm_sym_buf *find(const struct shm_comm *c, const void *p, size_t len, uint64_t *token)
{
    for (const struct shm_sym_buf *b = c->sym->bufs; b; b = b->next) {
        const char *mine = b->base + (size_t)c->rank * b->slot;
        if ((const char *)p >= mine && (size_t)((const char *)p - mine) <= b->bytes &&
            len <= b->bytes - (size_t)((const char *)p - mine)) {
            *token = b->id << TOKEN_SHIFT | (uint64_t)((const char *)p - mine);
            return b;
        }
    }
    return NULL;
}

/* Where rank r's copy of this rank's address p (in b) is. */
static char *at_rank(const struct shm_comm *c, const struct shm_sym_buf *b, const void *p, int r)
{
    return b->base + (size_t)r * b->slot + (size_t)((const char *)p - (b->base + (size_t)c->rank * b->slot));
}

int shm__sym_wants(const struct shm_op *o)
{
    const struct plx_coll_args *a = o->a;
    struct shm_comm *c = o->c;
    size_t bytes = a->count * o->es;
    /* up to small_bytes coll.c's one phase (one copy in, one barrier) is
     * already the cheaper one: two barriers cost more than the copy */
    if (!c->sym || a->coll != PLX_COLL_ALLREDUCE || a->mem_kind != PLX_MEM_HOST || bytes <= c->seg->small_bytes)
        return 0;
    uint64_t t;
    pthread_mutex_lock(&c->sym->mu);
    int yes = bytes / o->es == a->count && find(c, a->send, bytes, &t) && find(c, a->recv, bytes, &t);
    pthread_mutex_unlock(&c->sym->mu);
    return yes;
}

static size_t min_sz(size_t a, size_t b)
{
    return a < b ? a : b;
}

/* Elements [lo, hi): reduced over every rank's input in the order
 * first, first + 1, ... (mod P), a piece at a time, stored into every
 * rank's output. */
static int reduce_range(struct shm_op *o, char *const *in, char *const *out, size_t lo, size_t hi, int first)
{
    struct shm_comm *c = o->c;
    const struct plx_coll_args *a = o->a;
    size_t es = o->es, step = SHM_REDUCE_PIECE_BYTES / es;
    char *acc = c->sym->piece;
    for (size_t base = lo; base < hi; base += step) {
        size_t k = min_sz(step, hi - base), boff = base * es;
        memcpy(acc, in[first] + boff, k * es);
        for (int s = 1; s < c->size; s++) {
            int rc = c->host->reduce(acc, in[(first + s) % c->size] + boff, k, a->dtype, a->op);
            if (rc)
                return shm__op_error(o, rc, "%s(seq %llu): the core's reduction kernel refused dtype %d op %d",
                                     o->what, (unsigned long long)a->seq, a->dtype, a->op);
        }
        if (a->op == PLX_AVG) {
            int rc = c->host->scale_div(acc, k, a->dtype, (uint64_t)c->size);
            if (rc)
                return rc;
        }
        for (int r = 0; r < c->size; r++)
            plx_plugin_copy(out[r] + boff, acc, k * es);
    }
    return 0;
}

int shm__sym_run(struct shm_op *o)
{
    struct shm_comm *c = o->c;
    const struct plx_coll_args *a = o->a;
    size_t es = o->es, n = a->count, P = (size_t)c->size;
    char **in = malloc(2 * P * sizeof *in), **out = in + P;
    if (!in)
        return shm__op_error(o, PLX_ERR_NOMEM, "shm: out of memory");
    uint64_t tok_send = 0, tok_recv = 0;
    pthread_mutex_lock(&c->sym->mu);
    const struct shm_sym_buf *bs = find(c, a->send, n * es, &tok_send), *br = find(c, a->recv, n * es, &tok_recv);
    for (int r = 0; bs && br && r < c->size; r++) {
        in[r] = at_rank(c, bs, a->send, r);
        out[r] = at_rank(c, br, a->recv, r);
    }
    pthread_mutex_unlock(&c->sym->mu);
    int rc;
    if (!bs || !br) { /* freed by another thread since shm__sym_wants */
        rc = shm__op_error(o, PLX_ERR_INVALID_ARG, "%s(seq %llu): a registered buffer was freed during the call",
                           o->what, (unsigned long long)a->seq);
        goto out;
    }
    /* every input is ready, and every rank names the same buffers */
    uint32_t half = shm__publish(o, tok_send, tok_recv);
    if ((rc = shm__barrier(o)) != 0 || (rc = shm__expect_all(o, half)) != 0)
        goto out;
    size_t per = c->seg->slot_bytes / es;
    for (size_t off = 0; off < n && !rc; off += per) {
        size_t len = min_sz(per, n - off), s0, s1;
        shm__slice(o, len, c->rank, &s0, &s1);
        rc = reduce_range(o, in, out, off + s0, off + s1, c->rank);
    }
    if (rc) {
        shm__fail(c, rc, -1);
        goto out;
    }
    rc = shm__barrier(o); /* every output written, every input read */
out:
    free(in);
    return rc;
}
