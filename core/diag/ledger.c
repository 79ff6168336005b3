/* ledger.c - where every rank is: a memory-mapped ledger of each
 * communicator's last N operations (for plexus-top, on this host), and a
 * position each rank publishes in the store (for the error of a timeout,
 * which must name ranks on other hosts too).
 *
 * Hot path: posting and completing an operation writes one ledger entry
 * (a seqlock, two clock reads, no lock, no system call). The store is slow
 * (a round trip to rank 0's server), so a rank publishes its position there
 * only (a) when an operation completes and diag_publish_ms passed since its
 * last publication, and (b) from a wait that has lasted over SLOW_WAIT_MS,
 * every POLL_MS. A rank that is SIGSTOPped publishes nothing more; the
 * others read what it wrote last, at most diag_publish_ms stale, and the
 * message says how old it is. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "comm.h"
#include "config.h"
#include "diag.h"
#include "error.h"
#include "host.h"
#include "log.h"
#include "plexus/ledger.h"
#include "store.h"

_Static_assert(sizeof(struct plx_ledger_entry) == 56 && sizeof(struct plx_ledger_file) == 352,
               "the ledger's layout is a file format (plexus/ledger.h): change it only with its version");

#define SLOW_WAIT_MS 500
#define POLL_MS 250
#define POS_KEY "diag/pos/%d"

static int64_t key_int(const struct plx_comm *c, const char *key, int64_t def)
{
    int64_t v = def;
    plx__config_int_in(c->config, "core", key, def, &v);
    return v;
}

static double wall_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- the file ------------------------------------------------------------ */

static int ledger_folder(const struct plx_config *v, char *out, size_t len)
{
    const char *dir = plx__config_get_in(v, "core", "ledger_dir", NULL);
    const char *xdg = getenv("XDG_RUNTIME_DIR");
    if (dir && *dir)
        snprintf(out, len, "%s", dir);
    else if (xdg && *xdg)
        snprintf(out, len, "%s/plexus", xdg);
    else
        snprintf(out, len, "/tmp/plexus-%u", (unsigned)getuid());
    if (mkdir(out, 0700) != 0 && errno != EEXIST)
        return -1;
    struct stat st;
    /* A folder someone else owns (a shared /tmp) is not ours to write in. */
    if (stat(out, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != getuid())
        return -1;
    return 0;
}

/* Ledgers of processes that are gone (killed before plx_comm_destroy):
 * their names start with the pid. Only at communicator creation. */
static void remove_stale(const char *dir)
{
    DIR *h = opendir(dir);
    if (!h)
        return;
    for (struct dirent *e; (e = readdir(h));) {
        char *end;
        long pid = strtol(e->d_name, &end, 10);
        size_t l = strlen(e->d_name);
        if (pid <= 0 || *end != '.' || l < 8 || strcmp(e->d_name + l - 7, ".ledger"))
            continue;
        if (kill((pid_t)pid, 0) != 0 && errno == ESRCH) {
            char path[600];
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            unlink(path);
        }
    }
    closedir(h);
}

static void ledger_open(struct plx_comm *c, struct plx__diag_state *d, unsigned n)
{
    char dir[300];
    if (n == 0 || ledger_folder(c->config, dir, sizeof dir) != 0)
        return;
    remove_stale(dir);
    char name[128];
    size_t k = 0;
    for (const char *s = c->name; *s && k + 1 < sizeof name; s++) /* a file name: no slashes */
        name[k++] = (*s == '/' || *s == ' ') ? '_' : *s;
    name[k] = '\0';
    /* Two communicators of one process may share a name and rank (jobs of
     * threads): a per-process serial keeps their files apart, or one's
     * O_TRUNC would cut the other's mapping (SIGBUS) and its destroy unlink it. */
    static unsigned serial;
    unsigned id = __atomic_add_fetch(&serial, 1, __ATOMIC_RELAXED);
    snprintf(d->path, sizeof d->path, "%.300s/%d.%.127s.%u.r%d.ledger", dir, (int)getpid(), name, id, c->rank);
    size_t bytes = sizeof(struct plx_ledger_file) + (size_t)n * sizeof(struct plx_ledger_entry);
    unlink(d->path); /* only a dead process that had our pid can have left one here */
    int fd = open(d->path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0 || ftruncate(fd, (off_t)bytes) != 0) {
        plx__log(PLX_LOG_INFO, "core", "ledger %s: %s (no ledger for '%s')", d->path, strerror(errno), c->name);
        if (fd >= 0) {
            close(fd);
            unlink(d->path);
        }
        d->path[0] = '\0';
        return;
    }
    void *m = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (m == MAP_FAILED) {
        unlink(d->path);
        d->path[0] = '\0';
        return;
    }
    struct plx_ledger_file *f = m;
    f->version = PLX_LEDGER_VERSION;
    f->nentries = n;
    f->rank = c->rank;
    f->size = c->size;
    f->pid = (int32_t)getpid();
    snprintf(f->job, sizeof f->job, "%s", d->job);
    snprintf(f->comm, sizeof f->comm, "%s", c->name);
    snprintf(f->backend, sizeof f->backend, "%s", c->be->name);
    f->created_ns = f->heartbeat_ns = plx__clock_ns();
    __atomic_thread_fence(__ATOMIC_RELEASE);
    memcpy(f->magic, PLX_LEDGER_MAGIC, 8); /* last: a reader sees a whole header or none */
    d->lf = f;
    d->map_bytes = bytes;
    d->posted1 = &f->posted1;
    d->done1 = &f->done1;
}

int plx__diag_create(struct plx_comm *c, const struct plx_comm *from, const char *job)
{
    if (from && from->diag)
        job = plx__diag_of(from)->job;
    struct plx__diag_state *d = calloc(1, sizeof *d);
    if (!d)
        return plx__err(PLX_ERR_NOMEM, "out of memory");
    d->posted1 = &d->own_posted1; /* the file's once there is one (ledger_open) */
    d->done1 = &d->own_done1;
    int on = 1;
    plx__config_bool_in(c->config, "core", "fingerprint", 1, &on);
    d->inband = on;
    /* Per-peer state of the in-band fingerprint only: without it, none
     * (thousands of simulated ranks in one process). */
    size_t P = (size_t)c->size;
    if (on && (!(d->sent = calloc(P, sizeof *d->sent)) || !(d->rcvd = calloc(P, sizeof *d->rcvd)) ||
               !(d->sbounce = calloc(P, sizeof *d->sbounce)) || !(d->rbounce = calloc(P, sizeof *d->rbounce)))) {
        c->diag = &d->pub;
        plx__diag_destroy(c);
        return plx__err(PLX_ERR_NOMEM, "out of memory");
    }
    const char *nm = plx__config_get_in(c->config, "core", "fingerprint_native", NULL);
    d->native_mode = nm && !strcmp(nm, "every") ? PLX__FP_NATIVE_EVERY
                     : nm && !strcmp(nm, "off") ? PLX__FP_NATIVE_OFF
                                                : PLX__FP_NATIVE_TIMEOUT;
    d->publish_ns = (uint64_t)key_int(c, "diag_publish_ms", 1000000000); /* a duration: ns */
    d->pub.slow_ns = (uint64_t)SLOW_WAIT_MS * 1000000u;
    snprintf(d->job, sizeof d->job, "%s", job && *job ? job : "-");
    int64_t n = key_int(c, "ledger_entries", 64);
    ledger_open(c, d, n < 0 ? 0 : n > 65536 ? 65536 : (unsigned)n);
    /* A ledger whose file could not open still keeps the position. */
    d->records = d->inband || n > 0;
    d->seen_rank = -1;
    c->diag = &d->pub;
    c->dh = plx__diag_pick(c);
    return 0;
}

void plx__diag_destroy(struct plx_comm *c)
{
    struct plx__diag_state *d = plx__diag_of(c);
    if (!d)
        return;
    if (d->lf) {
        munmap(d->lf, d->map_bytes);
        unlink(d->path);
    }
    for (int i = 0; d->inband && i < c->size; i++) {
        if (d->sbounce)
            free(d->sbounce[i]);
        if (d->rbounce)
            free(d->rbounce[i]);
    }
    free(d->sbounce);
    free(d->rbounce);
    free(d->sent);
    free(d->rcvd);
    free(d);
    c->diag = NULL;
    c->dh = &plx__diag_none;
}

/* ---- entries ------------------------------------------------------------- */

/* The entry of seq: a mask for a power of two (the default), a division
 * (tens of cycles, on every operation) only for other sizes. */
static uint64_t entry_of(const struct plx_ledger_file *f, uint64_t seq)
{
    uint64_t n = f->nentries;
    return (n & (n - 1)) == 0 ? seq & (n - 1) : seq % n;
}

static void max_store(uint64_t *p, uint64_t v)
{
    uint64_t cur = __atomic_load_n(p, __ATOMIC_RELAXED);
    while (cur < v && !__atomic_compare_exchange_n(p, &cur, v, 1, __ATOMIC_RELEASE, __ATOMIC_RELAXED))
        ;
}

static void publish(struct plx_comm *c, uint64_t now);

static void slot_write(struct plx__diag_slot *s, const struct plx__fp *fp, uint64_t bytes, uint64_t now)
{
    uint32_t l = __atomic_load_n(&s->lock, __ATOMIC_RELAXED);
    __atomic_store_n(&s->lock, l + 1, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_RELEASE);
    __atomic_store_n(&s->fp.seq, fp->seq, __ATOMIC_RELAXED);
    __atomic_store_n(&s->fp.count, fp->count, __ATOMIC_RELAXED);
    __atomic_store_n(&s->fp.coll, fp->coll, __ATOMIC_RELAXED);
    __atomic_store_n(&s->fp.dtype, fp->dtype, __ATOMIC_RELAXED);
    __atomic_store_n(&s->fp.op, fp->op, __ATOMIC_RELAXED);
    __atomic_store_n(&s->fp.root, fp->root, __ATOMIC_RELAXED);
    __atomic_store_n(&s->bytes, bytes, __ATOMIC_RELAXED);
    __atomic_store_n(&s->since_ns, now, __ATOMIC_RELAXED);
    __atomic_store_n(&s->lock, l + 2, __ATOMIC_RELEASE);
}

/* The call of seq1 - 1 from its slot: 0 when there is none (seq1 0) or
 * the slot has moved on to a newer operation. */
static int slot_read(const struct plx__diag_state *d, uint64_t seq1, struct plx__diag_slot *out)
{
    if (seq1 == 0)
        return 0;
    const struct plx__diag_slot *s = &d->recent[(seq1 - 1) % PLX__DIAG_RECENT];
    for (int tries = 0; tries < 1000; tries++) {
        uint32_t l = __atomic_load_n(&s->lock, __ATOMIC_ACQUIRE);
        if (l & 1) {
            sched_yield(); /* its writer is between two stores, or was preempted there */
            continue;
        }
        out->fp.seq = __atomic_load_n(&s->fp.seq, __ATOMIC_RELAXED);
        out->fp.count = __atomic_load_n(&s->fp.count, __ATOMIC_RELAXED);
        out->fp.coll = __atomic_load_n(&s->fp.coll, __ATOMIC_RELAXED);
        out->fp.dtype = __atomic_load_n(&s->fp.dtype, __ATOMIC_RELAXED);
        out->fp.op = __atomic_load_n(&s->fp.op, __ATOMIC_RELAXED);
        out->fp.root = __atomic_load_n(&s->fp.root, __ATOMIC_RELAXED);
        out->bytes = __atomic_load_n(&s->bytes, __ATOMIC_RELAXED);
        out->since_ns = __atomic_load_n(&s->since_ns, __ATOMIC_RELAXED);
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        if (__atomic_load_n(&s->lock, __ATOMIC_RELAXED) == l)
            return out->fp.seq == seq1 - 1;
    }
    return 0;
}

/* Running: the newest posted operation, unless it completed. */
static int running_slot(const struct plx__diag_state *d, struct plx__diag_slot *out)
{
    uint64_t p1 = __atomic_load_n(d->posted1, __ATOMIC_ACQUIRE);
    return p1 > __atomic_load_n(d->done1, __ATOMIC_RELAXED) && slot_read(d, p1, out);
}

static void post_as(struct plx_comm *c, const struct plx__fp *fp, uint64_t bytes, uint32_t state)
{
    struct plx__diag_state *d = plx__diag_of(c);
    if (!d)
        return;
    uint64_t now = plx__clock_coarse_ns(); /* the ledger says seconds: tick resolution is plenty */
    slot_write(&d->recent[fp->seq % PLX__DIAG_RECENT], fp, bytes, now);
    struct plx_ledger_file *f = d->lf;
    if (!f) {
        max_store(d->posted1, fp->seq + 1); /* after the slot: a reader of posted1 finds its call */
        return;
    }
    struct plx_ledger_entry *e = &f->entries[entry_of(f, fp->seq)];
    uint32_t l = e->lock;
    __atomic_store_n(&e->lock, l + 1, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_RELEASE);
    e->state = state;
    e->seq = fp->seq;
    e->coll = fp->coll;
    e->dtype = fp->dtype;
    e->count = fp->count;
    e->bytes = bytes;
    e->start_ns = now;
    e->end_ns = 0;
    __atomic_store_n(&e->lock, l + 2, __ATOMIC_RELEASE);
    max_store(d->posted1, fp->seq + 1); /* f's: after the slot and the entry */
    __atomic_store_n(&f->heartbeat_ns, now, __ATOMIC_RELAXED);
}

void plx__ledger_post(struct plx_comm *c, const struct plx__fp *fp, uint64_t bytes)
{
    post_as(c, fp, bytes, PLX__OP_POSTED);
}

void plx__ledger_post_running(struct plx_comm *c, const struct plx__fp *fp, uint64_t bytes)
{
    post_as(c, fp, bytes, PLX__OP_RUNNING);
}

void plx__ledger_state(struct plx_comm *c, uint64_t seq, int state)
{
    struct plx__diag_state *d = plx__diag_of(c);
    if (!d)
        return;
    uint64_t now = plx__clock_coarse_ns();
    int final = state == PLX__OP_DONE || state == PLX__OP_FAILED;
    if (state == PLX__OP_DONE)
        max_store(d->done1, seq + 1);
    struct plx_ledger_file *f = d->lf;
    if (f) {
        struct plx_ledger_entry *e = &f->entries[entry_of(f, seq)];
        if (e->seq == seq) {
            uint32_t l = e->lock;
            __atomic_store_n(&e->lock, l + 1, __ATOMIC_RELAXED);
            __atomic_thread_fence(__ATOMIC_RELEASE);
            e->state = (uint32_t)state;
            if (final)
                e->end_ns = now;
            __atomic_store_n(&e->lock, l + 2, __ATOMIC_RELEASE);
        }
        __atomic_store_n(&f->heartbeat_ns, now, __ATOMIC_RELAXED);
    }
    /* At most once per diag_publish_ms, elected by a CAS. */
    uint64_t last = __atomic_load_n(&d->last_pub_ns, __ATOMIC_RELAXED);
    if (state == PLX__OP_DONE && c->store && (last == 0 || now - last >= d->publish_ns) &&
        __atomic_compare_exchange_n(&d->last_pub_ns, &last, now, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        publish(c, now);
}

/* ---- positions in the store ------------------------------------------- */

int plx__diag_store_usable(const struct plx_comm *c)
{
    return c->store && c->diag && !__atomic_load_n(&plx__diag_of(c)->store_off, __ATOMIC_RELAXED);
}

void plx__diag_store_done(struct plx_comm *c, uint64_t t0, int rc)
{
    if (rc >= 0 && plx__clock_ns() - t0 < 2000000000u)
        return;
    if (!__atomic_exchange_n(&plx__diag_of(c)->store_off, 1, __ATOMIC_RELAXED))
        plx__log(PLX_LOG_WARN, "core", "'%s': the store %s; rank %d stops publishing its position there", c->name,
                 rc < 0 ? "failed" : "took over 2 s", c->rank);
}

struct pos {
    uint64_t done1;
    int running, has_last;
    struct plx__fp fp, last;
    uint64_t bytes;
    double since; /* wall clock: the op was posted */
    double at;    /* wall clock: published */
};

static void publish(struct plx_comm *c, uint64_t now)
{
    struct plx__diag_state *d = plx__diag_of(c);
    /* Nothing recorded (the none table): no position rather than a wrong one. */
    if (!plx__diag_store_usable(c) || !d->records)
        return;
    char key[32], val[256], keep[1024];
    double w = wall_s();
    struct plx__diag_slot run = {0}, last = {0};
    uint64_t done1 = __atomic_load_n(d->done1, __ATOMIC_ACQUIRE);
    int running = running_slot(d, &run);
    int has_last = slot_read(d, done1, &last);
    snprintf(keep, sizeof keep, "%s", plx_last_error());
    snprintf(key, sizeof key, POS_KEY, c->rank);
    snprintf(val, sizeof val, "%llu %d %llu %llu %d %d %d %d %llu %.3f %.3f %d %llu %llu %d %d %d %d",
             (unsigned long long)done1, running, (unsigned long long)run.fp.seq, (unsigned long long)run.fp.count,
             run.fp.coll, run.fp.dtype, run.fp.op, run.fp.root, (unsigned long long)run.bytes,
             w - (double)(now - run.since_ns) * 1e-9, w, has_last, (unsigned long long)last.fp.seq,
             (unsigned long long)last.fp.count, last.fp.coll, last.fp.dtype, last.fp.op, last.fp.root);
    uint64_t t0 = plx__clock_ns();
    plx__diag_store_done(c, t0, plx__store_set(c->store, key, val, strlen(val) + 1));
    __atomic_store_n(&d->published_done1, done1, __ATOMIC_RELAXED);
    plx__err(0, "%s", keep);
}

static int parse_pos(const char *buf, struct pos *p)
{
    unsigned long long done1, seq, count, bytes, lseq, lcount;
    int ok = sscanf(buf, "%llu %d %llu %llu %d %d %d %d %llu %lf %lf %d %llu %llu %d %d %d %d", &done1, &p->running,
                    &seq, &count, &p->fp.coll, &p->fp.dtype, &p->fp.op, &p->fp.root, &bytes, &p->since, &p->at,
                    &p->has_last, &lseq, &lcount, &p->last.coll, &p->last.dtype, &p->last.op,
                    &p->last.root) == 18;
    p->done1 = done1;
    p->fp.seq = seq;
    p->fp.count = count;
    p->bytes = bytes;
    p->last.seq = lseq;
    p->last.count = lcount;
    return ok;
}

/* Rank r's published position into p, and its text into raw (256 bytes)
 * unless NULL. */
static int read_pos(struct plx_comm *c, int r, struct pos *p, char *raw)
{
    char key[32];
    snprintf(key, sizeof key, POS_KEY, r);
    if (!plx__diag_store_usable(c))
        return 0;
    uint64_t t0 = plx__clock_ns();
    int rc = c->store->ops->check(c->store, key);
    plx__diag_store_done(c, t0, rc < 0 ? rc : 0);
    if (rc != 1)
        return 0;
    void *v = NULL;
    size_t n = 0;
    int ok = 0;
    t0 = plx__clock_ns();
    rc = plx__store_get(c->store, key, &v, &n, 500);
    plx__diag_store_done(c, t0, rc);
    if (rc == 0 && v) {
        char buf[256];
        snprintf(buf, sizeof buf, "%.*s", (int)n, (const char *)v);
        if ((ok = parse_pos(buf, p)) && raw)
            memcpy(raw, buf, sizeof buf);
    }
    free(v);
    return ok;
}

/* The last position read of the peer a slow wait waits for, kept for an
 * error that finds the store gone (diag.h). Slow path only: a spin lock. */
static void seen_lock(struct plx__diag_state *d)
{
    while (__atomic_exchange_n(&d->seen_lock, 1, __ATOMIC_ACQUIRE))
        sched_yield();
}

static void remember_seen(struct plx__diag_state *d, int r, uint64_t seq, const char *raw)
{
    seen_lock(d);
    d->seen_rank = r;
    d->seen_seq = seq;
    memcpy(d->seen, raw, sizeof d->seen);
    __atomic_store_n(&d->seen_lock, 0, __ATOMIC_RELEASE);
}

/* Does peer's position say it ran seq mine->seq as another call? */
static int differs(const struct plx__fp *mine, const struct pos *p, struct plx__fp *theirs)
{
    if (p->running && p->fp.seq == mine->seq && !plx__fp_equal(&p->fp, mine)) {
        *theirs = p->fp;
        return 1;
    }
    if (p->has_last && p->last.seq == mine->seq && !plx__fp_equal(&p->last, mine)) {
        *theirs = p->last;
        return 1;
    }
    return 0;
}

int plx__ledger_slow_wait(struct plx_comm *c, uint64_t waited_ns, int peer)
{
    struct plx__diag_state *d = plx__diag_of(c);
    if (!d || waited_ns < d->pub.slow_ns || !plx__diag_store_usable(c))
        return 0;
    uint64_t now = plx__clock_ns();
    if (now < __atomic_load_n(&d->next_poll_ns, __ATOMIC_RELAXED))
        return 0;
    __atomic_store_n(&d->next_poll_ns, now + (uint64_t)POLL_MS * 1000000u, __ATOMIC_RELAXED);
    publish(c, now);
    __atomic_store_n(&d->last_pub_ns, now, __ATOMIC_RELAXED);
    char msg[512];
    if (plx__diag_mismatch_published(c, msg, sizeof msg))
        return plx__err(PLX_ERR_MISMATCH, "%s", msg);
    /* A hierarchy's cross step (hier.c) checks the user's call in-band;
     * its steps differ from host to host by design where counts do. */
    if (c->stands_for)
        return 0;
    struct pos p;
    struct plx__fp theirs;
    struct plx__diag_slot run;
    int run_on = running_slot(d, &run);
    const struct plx__fp *mine = d->cur_on ? &d->cur : run_on ? &run.fp : NULL;
    char raw[256];
    int got = peer >= 0 && peer < c->size && mine && read_pos(c, peer, &p, raw);
    if (got)
        remember_seen(d, peer, mine->seq, raw);
    if (got && differs(mine, &p, &theirs)) {
        plx__fp_mismatch_msg(mine, c->rank, &theirs, peer, msg, sizeof msg);
        plx__diag_publish_mismatch(c, msg);
        return plx__err(PLX_ERR_MISMATCH, "%s", msg);
    }
    return 0;
}

/* ---- explaining a failure -------------------------------------------- */

static void human_bytes(uint64_t b, char *out, size_t len)
{
    if (b >= (1u << 20) && b % (1u << 20) == 0)
        snprintf(out, len, "%llu MiB", (unsigned long long)(b >> 20));
    else if (b >= 1024 && b % 1024 == 0)
        snprintf(out, len, "%llu KiB", (unsigned long long)(b >> 10));
    else
        snprintf(out, len, "%llu B", (unsigned long long)b);
}

/* One rank's place, in words. */
static void describe(const struct pos *p, int have, uint64_t newest, double now, char *out, size_t len)
{
    if (!have) {
        snprintf(out, len, "published no position");
        return;
    }
    char b[32];
    size_t at = 0;
    if (p->running) {
        human_bytes(p->bytes, b, sizeof b);
        at = (size_t)snprintf(out, len, "in #%llu %s %s for %.0f s", (unsigned long long)p->fp.seq,
                              plx_coll_name(p->fp.coll), b, now - p->since);
    } else if (p->done1) {
        at = (size_t)snprintf(out, len, "last completed #%llu", (unsigned long long)(p->done1 - 1));
    } else {
        at = (size_t)snprintf(out, len, "completed nothing yet");
    }
    uint64_t entered1 = p->running ? p->fp.seq + 1 : p->done1;
    if (at < len && newest + 1 > entered1)
        at += (size_t)snprintf(out + at, len - at, "%snever entered #%llu", p->running ? ", " : " and ",
                               (unsigned long long)newest);
    /* Positions are published now and then: always say how old this one is. */
    if (at < len)
        snprintf(out + at, len - at, " (as of %.1f s ago)", now - p->at > 0 ? now - p->at : 0.0);
}

/* Every rank's published position into ps/have (at most P); after a
 * timeout, ranks still inside their wait get a moment to publish theirs.
 * Returns the newest sequence number a rank is running. */
static uint64_t read_positions(struct plx_comm *c, struct pos *ps, int *have, int P, int status, uint64_t now_ns)
{
    uint64_t until = now_ns + (uint64_t)(SLOW_WAIT_MS + POLL_MS) * 1000000u;
    for (;;) {
        uint64_t newest = 0;
        int missing = 0;
        for (int r = 0; r < P; r++) {
            have[r] = read_pos(c, r, &ps[r], NULL);
            missing += !have[r];
            if (have[r] && ps[r].running && ps[r].fp.seq > newest)
                newest = ps[r].fp.seq;
        }
        if (!missing || plx__clock_ns() >= until || status != PLX_ERR_TIMEOUT)
            return newest;
        struct timespec ts = {0, 100000000};
        nanosleep(&ts, NULL);
    }
}

/* Two ranks in one sequence number with different calls: msg says so, 1. */
static int running_mismatch(const struct pos *ps, const int *have, int P, char *msg, size_t len)
{
    for (int r = 0; r < P; r++)
        for (int q = r + 1; q < P; q++)
            if (have[r] && have[q] && ps[r].running && ps[q].running && ps[r].fp.seq == ps[q].fp.seq &&
                !plx__fp_equal(&ps[r].fp, &ps[q].fp)) {
                char mm[400], orig[768];
                plx__fp_mismatch_msg(&ps[r].fp, r, &ps[q].fp, q, mm, sizeof mm);
                snprintf(orig, sizeof orig, "%s", msg);
                snprintf(msg, len, "%s (found when a wait failed: %s)", mm, orig);
                return 1;
            }
    return 0;
}

/* " [as last read before the store was lost: rank R ...]" after msg, when
 * the newest operation's wait read it (not an earlier operation's). */
static void append_seen(struct plx__diag_state *d, char *msg, size_t len)
{
    struct pos p = {0};
    uint64_t posted1 = __atomic_load_n(d->posted1, __ATOMIC_ACQUIRE);
    seen_lock(d);
    int r = d->seen_rank, ok = r >= 0 && posted1 && d->seen_seq == posted1 - 1 && parse_pos(d->seen, &p);
    __atomic_store_n(&d->seen_lock, 0, __ATOMIC_RELEASE);
    size_t at = strlen(msg);
    if (!ok || at + 2 >= len)
        return;
    char where[160];
    describe(&p, 1, posted1 - 1, wall_s(), where, sizeof where);
    snprintf(msg + at, len - at, " [as last read before the store was lost: rank %d %s%s]", r,
             strncmp(where, "in ", 3) ? "" : "was ", where);
}

/* " [where the ranks are: ...]" after msg, ranks with the same story merged. */
static void append_positions(char *msg, size_t len, const struct pos *ps, const int *have, int P, uint64_t newest)
{
    double now = wall_s();
    size_t at = strlen(msg);
    if (at + 16 < len)
        at += (size_t)snprintf(msg + at, len - at, " [where the ranks are: ");
    char prev[160] = "", cur[160];
    int first = -1;
    for (int r = 0; r <= P && at + 1 < len; r++) {
        if (r < P)
            describe(&ps[r], have[r], newest, now, cur, sizeof cur);
        if (r < P && first >= 0 && !strcmp(cur, prev))
            continue;
        if (first >= 0) {
            int last = r - 1;
            const char *verb = strncmp(prev, "in ", 3) ? "" : last == first ? "is " : "are ";
            if (last == first)
                at += (size_t)snprintf(msg + at, len - at, "%srank %d %s%s", first ? "; " : "", first, verb, prev);
            else
                at += (size_t)snprintf(msg + at, len - at, "%sranks %d-%d %s%s", first ? "; " : "", first, last, verb,
                                       prev);
        }
        if (at + 1 >= len)
            break;
        first = r;
        snprintf(prev, sizeof prev, "%s", cur);
    }
    if (at + 2 < len)
        snprintf(msg + at, len - at, "]");
}

int plx__ledger_explain(struct plx_comm *c, int status, char *msg, size_t len)
{
    struct plx__diag_state *d = plx__diag_of(c);
    if (!d || status == PLX_ERR_MISMATCH || status == PLX_ERR_INVALID_ARG || status == PLX_ERR_UNSUPPORTED ||
        status == PLX_ERR_INVALID_USAGE)
        return status;
    int lost_peer = status == PLX_ERR_TIMEOUT || status == PLX_ERR_REMOTE || status == PLX_ERR_PEER_LOST;
    if (!plx__diag_store_usable(c)) {
        if (lost_peer)
            append_seen(d, msg, len);
        return status;
    }
    char keep[1024], found[512];
    snprintf(keep, sizeof keep, "%s", plx_last_error());
    /* A rank found a mismatch: that is what this failure is. */
    if (plx__diag_mismatch_published(c, found, sizeof found)) {
        char orig[768];
        snprintf(orig, sizeof orig, "%s", msg);
        snprintf(msg, len, "%s (here: %s)", found, orig);
        plx__err(0, "%s", keep);
        return PLX_ERR_MISMATCH;
    }
    if (!lost_peer) {
        plx__err(0, "%s", keep);
        return status;
    }
    uint64_t now_ns = plx__clock_ns();
    publish(c, now_ns);
    __atomic_store_n(&d->last_pub_ns, now_ns, __ATOMIC_RELAXED);
    int P = c->size > 256 ? 256 : c->size;
    struct pos *ps = calloc((size_t)P, sizeof *ps);
    int *have = calloc((size_t)P, sizeof *have);
    if (ps && have) {
        uint64_t newest = read_positions(c, ps, have, P, status, now_ns);
        int known = 0;
        for (int r = 0; r < P; r++)
            known += have[r];
        if (running_mismatch(ps, have, P, msg, len))
            status = PLX_ERR_MISMATCH;
        else if (known)
            append_positions(msg, len, ps, have, P, newest);
        else /* the store has nothing: it may be gone with rank 0 */
            append_seen(d, msg, len);
    }
    free(ps);
    free(have);
    plx__err(0, "%s", keep);
    return status;
}
