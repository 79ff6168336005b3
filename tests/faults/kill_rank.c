/* kill_rank.c - one rank of kill_loop: init, a run of checked allreduces,
 * split, an allreduce on the child, a barrier, destroy; then (every
 * survivor) a new communicator of the survivors on a fresh store. The victim
 * dies at its planned point; the others record their first error, whether
 * the failed communicator refuses new work, and the new communicator. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check_values.h"
#include "kill.h"
#include "plexus/plexus.h"
#include "procs.h"

#define NCOLL 16
#define MAX_COUNT (1u << 19)

struct rank {
    const struct kill_iter *k;
    struct kill_report *me;
    int rank;
    int dying;
};

static void die(struct rank *r, int at_end)
{
    if (__atomic_exchange_n(&r->dying, 1, __ATOMIC_ACQ_REL)) {
        for (;;)
            pause(); /* the other path is killing us */
    }
    r->me->killed_phase = r->me->phase;
    r->me->killed_at_end = at_end;
    r->me->kill_s = now_s();
    kill(getpid(), SIGKILL);
}

static void *killer(void *arg)
{
    struct rank *r = arg;
    double d = r->k->delay_s;
    struct timespec ts = {(time_t)d, (long)((d - (double)(time_t)d) * 1e9)};
    nanosleep(&ts, NULL);
    die(r, 0);
    return NULL;
}

static void enter(struct rank *r, int phase)
{
    double now = now_s();
    if (r->me->phase != PH_START)
        r->me->phase_ms[r->me->phase] = (now - r->me->phase_s) * 1e3;
    r->me->phase_s = now;
    r->me->phase = phase;
    if (r->rank == r->k->victim && phase == r->k->kill_phase) {
        pthread_t t;
        if (pthread_create(&t, NULL, killer, r) != 0)
            die(r, 0);
        pthread_detach(t);
    }
}

static void leave(struct rank *r, int phase)
{
    if (r->rank == r->k->victim && phase == r->k->kill_phase)
        die(r, 1);
}

static void record(struct rank *r, int rc, int phase)
{
    r->me->err_rc = rc;
    r->me->err_phase = phase;
    r->me->err_s = now_s();
    r->me->err_phase_s = r->me->phase_s;
    snprintf(r->me->err_msg, sizeof r->me->err_msg, "%s", plx_last_error());
    if (r->rank == r->k->victim) /* nobody has died yet: the harness itself is wrong */
        _exit(3);
    if (r->k->victim < 0) {
        fprintf(stderr, "calibration run, rank %d: %s\n", r->rank, r->me->err_msg);
        _exit(3);
    }
}

/* New work on a communicator that failed: must be refused at once. */
static void check_refusal(struct rank *r, struct plx_comm *c)
{
    int v = 1, s = 0;
    double t0 = now_s();
    r->me->refuse_checked = 1;
    r->me->refuse_rc = plx_allreduce(c, &v, &s, 1, PLX_I32, PLX_SUM);
    r->me->refuse_ms = (now_s() - t0) * 1e3;
    snprintf(r->me->refuse_msg, sizeof r->me->refuse_msg, "%s", plx_last_error());
}

static uint64_t next(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static int allreduces(struct rank *r, struct plx_comm *c, void *send, void *recv)
{
    static const int dts[] = {PLX_F32, PLX_I32, PLX_F64, PLX_BF16, PLX_I64, PLX_U8};
    uint64_t s = r->k->seed | 1;
    for (int n = 0; n < NCOLL; n++) {
        /* log-uniform counts from 1 to MAX_COUNT, the same on every rank */
        size_t count = (size_t)1 << (next(&s) % 20);
        count += next(&s) % count;
        if (count > MAX_COUNT)
            count = MAX_COUNT;
        int dt = dts[next(&s) % (sizeof dts / sizeof dts[0])];
        for (size_t i = 0; i < count; i++)
            put(send, i, dt, val(r->rank, i, PLX_SUM, KILL_RANKS));
        int rc = plx_allreduce(c, send, recv, count, dt, PLX_SUM);
        if (rc)
            return rc;
        for (size_t i = 0; i < count; i++)
            if (get(recv, i, dt) != reduce_ref(i, PLX_SUM, dt, KILL_RANKS)) {
                r->me->wrong = 1;
                break;
            }
    }
    return 0;
}

static void options(struct plx_comm_options *o, const char *name, int rank, int size, int port, int64_t timeout_ms)
{
    static char url[64];
    snprintf(url, sizeof url, "tcp://127.0.0.1:%d", port);
    plx_comm_options_init(o);
    o->backend = "tcp";
    o->init = url;
    o->name = name;
    o->rank = o->local_rank = rank;
    o->size = o->local_size = size;
    o->timeout_ms = timeout_ms;
}

/* The survivors, renumbered without the victim, on a fresh store. They
 * arrive up to a timeout apart (one may have waited for the failure). */
static void recover(struct rank *r)
{
    enter(r, PH_RECOVER);
    struct plx_comm_options o;
    int me = r->rank - (r->rank > r->k->victim), n = KILL_RANKS - 1;
    options(&o, "recovery", me, n, r->k->port2, 4 * r->k->timeout_ms);
    struct plx_comm *c = NULL;
    int rc = plx_comm_init(&o, &c);
    int v = me + 1, s = 0;
    if (rc == 0 && (rc = plx_allreduce(c, &v, &s, 1, PLX_I32, PLX_SUM)) == 0 && s != n * (n + 1) / 2)
        rc = -100;
    r->me->recover_rc = rc;
    snprintf(r->me->recover_msg, sizeof r->me->recover_msg, "%s", rc == -100 ? "wrong sum" : plx_last_error());
    plx_comm_destroy(c);
    enter(r, PH_DONE);
}

int kill_rank_main(int rank, void *arg)
{
    struct rank r = {.k = arg, .me = &((struct kill_iter *)arg)->sh->r[rank], .rank = rank};
    struct plx_comm *world = NULL, *child = NULL, *broken = NULL;
    void *send = malloc(MAX_COUNT * 8), *recv = malloc(MAX_COUNT * 8);
    struct plx_comm_options o;
    int rc;
    if (!send || !recv)
        return 4;
    options(&o, "world", rank, KILL_RANKS, r.k->port, r.k->timeout_ms);

    enter(&r, PH_INIT);
    rc = plx_comm_init(&o, &world);
    leave(&r, PH_INIT);
    if (rc) {
        record(&r, rc, PH_INIT);
        goto out;
    }
    enter(&r, PH_COLL);
    rc = allreduces(&r, world, send, recv);
    leave(&r, PH_COLL);
    if (rc) {
        record(&r, rc, PH_COLL);
        broken = world;
        goto out;
    }
    enter(&r, PH_SPLIT);
    rc = plx_comm_split(world, 0, rank, &child); /* one color, key = rank: child ranks equal world ranks */
    leave(&r, PH_SPLIT);
    if (rc) {
        record(&r, rc, PH_SPLIT);
        broken = world;
        goto out;
    }
    enter(&r, PH_CHILD);
    int v = rank + 1, s = 0;
    rc = plx_allreduce(child, &v, &s, 1, PLX_I32, PLX_SUM);
    if (rc) {
        record(&r, rc, PH_CHILD);
        broken = child;
        goto out;
    }
    r.me->wrong |= s != KILL_RANKS * (KILL_RANKS + 1) / 2;
    plx_comm_destroy(child);
    child = NULL;
    enter(&r, PH_BARRIER);
    if ((rc = plx_barrier(world)) != 0) {
        record(&r, rc, PH_BARRIER);
        broken = world;
        goto out;
    }
    enter(&r, PH_DESTROY);
    plx_comm_destroy(world);
    world = NULL;
    leave(&r, PH_DESTROY);
    r.me->finished = 1;
out:
    if (broken)
        check_refusal(&r, broken);
    plx_comm_destroy(child);
    plx_comm_destroy(world);
    free(send);
    free(recv);
    if (rank == r.k->victim) /* the victim never gets here unless the harness is wrong */
        return 3;
    if (r.k->victim < 0) { /* calibration: everyone finished */
        enter(&r, PH_DONE);
        return r.me->err_rc != 0;
    }
    recover(&r);
    return 0;
}
