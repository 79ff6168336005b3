/* agree.c - the survivors of a communicator agree on who is alive, through
 * the job's store, whatever state the communicator's own connections are in.
 *
 * Each survivor marks itself present and keeps a heartbeat counter going in
 * the store (a thread, so that it also beats while it builds the agreed
 * communicator). Every survivor watches every rank: present with a beating
 * heart counts as alive; absent for the wait, or silent for the wait, as
 * failed. Once a survivor has placed every rank, it takes the round's
 * ticket (an atomic add in the store): the first one writes the round's
 * decision, and every survivor reads that one decision, so all take the
 * same set. A rank that dies during the agreement stops beating and is left
 * out by whoever decides after. Every member then confirms the decision
 * before anyone builds on it: a member that goes silent instead makes the
 * others give the round up and decide again. One that dies after
 * confirming fails the new communicator's rendezvous (a bounded wait), and
 * plx__agree_retry moves every survivor to the next round. A decider that dies between its ticket and its
 * decision is waited for one wait, then the round is skipped. Every wait is
 * bounded by the deadline.
 *
 * A rank that the backend saw die (its lost-ranks hint) is published as
 * dead/<rank>, and every survivor counts an absent rank so published as
 * failed at once instead of after the wait. The hint never overrides a rank
 * that is present: one that marked itself in is judged by its heartbeat. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agree.h"
#include "clock.h"
#include "comm.h"
#include "error.h"
#include "store.h"

#define POLL_NS 20000000
#define BEAT_NS 100000000

struct agree_state {
    struct plx_comm *c;
    const char *ns;
    pthread_t beat;
    int beating;
    int stop;             /* read by the heartbeat thread */
    int min_round;        /* rounds below this failed here */
    uint64_t entry_ns;
    uint64_t watched_ns;  /* when this rank last looked at the others */
    int *present;
    unsigned char *dead;  /* ranks known dead: seen by this rank's backend or published by another */
    unsigned char *seen;  /* scratch for the backend's hint */
    int64_t *beats;       /* each rank's last heartbeat value seen */
    uint64_t *changed_ns; /* when it last changed (or was first seen) */
};

static void sleep_ns(long ns)
{
    struct timespec ts = {0, ns};
    nanosleep(&ts, NULL);
}

static void key_of(char *out, size_t n, const struct agree_state *st, const char *what, int i)
{
    snprintf(out, n, "%s/%s/%d", st->ns, what, i);
}

static void *beat_main(void *arg)
{
    struct agree_state *st = arg;
    char key[512];
    key_of(key, sizeof key, st, "hb", st->c->rank);
    while (!__atomic_load_n(&st->stop, __ATOMIC_ACQUIRE)) {
        int64_t v;
        if (plx__store_add(st->c->store, key, 1, &v) != 0)
            break; /* the store is gone: the agreement fails on it too */
        for (int i = 0; i < BEAT_NS / POLL_NS && !__atomic_load_n(&st->stop, __ATOMIC_ACQUIRE); i++)
            sleep_ns(POLL_NS);
    }
    return NULL;
}

static int start(struct plx_comm *c, struct plx__agree *a)
{
    struct agree_state *st = calloc(1, sizeof *st);
    size_t n = (size_t)c->size;
    if (!st || !(st->present = calloc(n, sizeof *st->present)) || !(st->beats = calloc(n, sizeof *st->beats)) ||
        !(st->changed_ns = calloc(n, sizeof *st->changed_ns)) || !(st->dead = calloc(n, 1)) ||
        !(st->seen = calloc(n, 1))) {
        a->st = st;
        plx__agree_end(a);
        return plx__err(PLX_ERR_NOMEM, "out of memory");
    }
    a->st = st;
    st->c = c;
    st->ns = a->ns;
    st->entry_ns = st->watched_ns = plx__clock_ns();
    char key[512];
    key_of(key, sizeof key, st, "in", c->rank);
    int rc = plx__store_set(c->store, key, "1", 1);
    if (rc == 0 && pthread_create(&st->beat, NULL, beat_main, st) != 0)
        rc = plx__err(PLX_ERR_SYSTEM, "cannot start the heartbeat thread");
    st->beating = rc == 0;
    return rc;
}

void plx__agree_end(struct plx__agree *a)
{
    struct agree_state *st = a->st;
    if (!st)
        return;
    if (st->beating) {
        __atomic_store_n(&st->stop, 1, __ATOMIC_RELEASE);
        pthread_join(st->beat, NULL);
    }
    free(st->present);
    free(st->beats);
    free(st->changed_ns);
    free(st->dead);
    free(st->seen);
    free(st);
    a->st = NULL;
}

/* The backend's lost-ranks hint (ABI 1.7): publish each rank it saw die
 * that nobody published yet, so that every survivor knows. */
static int publish_dead(struct agree_state *st)
{
    struct plx_comm *c = st->c;
    if (c->be->abi_minor < 7 || !c->be->ops.comm_lost_ranks)
        return 0;
    memset(st->seen, 0, (size_t)c->size);
    if (c->be->ops.comm_lost_ranks(c->bc, st->seen, c->size) <= 0)
        return 0;
    for (int i = 0; i < c->size; i++) {
        if (!st->seen[i] || st->dead[i] || i == c->rank)
            continue;
        char key[512];
        key_of(key, sizeof key, st, "dead", i);
        int rc = plx__store_set(c->store, key, "1", 1);
        if (rc != 0)
            return rc;
        st->dead[i] = 1;
    }
    return 0;
}

/* Rank i, absent so far: 1 if a survivor saw it die. */
static int known_dead(struct agree_state *st, int i)
{
    if (!st->dead[i]) {
        char key[512];
        key_of(key, sizeof key, st, "dead", i);
        st->dead[i] = st->c->store->ops->check(st->c->store, key) == 1;
    }
    return st->dead[i];
}

/* Look at rank i once: 1 alive, 0 failed, -1 not known yet. */
static int place(struct agree_state *st, int i, uint64_t now, int64_t wait_ns)
{
    struct plx_store *s = st->c->store;
    char key[512];
    if (i == st->c->rank)
        return 1;
    if (!st->present[i]) {
        key_of(key, sizeof key, st, "in", i);
        if (s->ops->check(s, key) != 1)
            return now - st->entry_ns > (uint64_t)wait_ns || known_dead(st, i) ? 0 : -1;
        st->present[i] = 1;
        st->changed_ns[i] = now;
    }
    int64_t v = 0;
    key_of(key, sizeof key, st, "hb", i);
    if (plx__store_add(s, key, 0, &v) != 0)
        return -1;
    if (v != st->beats[i]) {
        st->beats[i] = v;
        st->changed_ns[i] = now;
    }
    return now - st->changed_ns[i] <= (uint64_t)wait_ns;
}

/* 1 and a->alive from round k's decision, if it is there; 0 if not. */
static int read_decision(struct plx_comm *c, struct plx__agree *a, int k)
{
    char key[512];
    snprintf(key, sizeof key, "%s/decision/%d", a->ns, k);
    if (c->store->ops->check(c->store, key) != 1)
        return 0;
    void *val = NULL;
    size_t len = 0;
    if (plx__store_get(c->store, key, &val, &len, 1000) != 0 || len != (size_t)c->size) {
        free(val);
        return 0;
    }
    for (int i = 0; i < c->size; i++)
        a->alive[i] = ((char *)val)[i] == '1';
    free(val);
    a->round = k;
    return 1;
}

/* Place every rank; if all are placed, try to decide round k. */
static int try_decide(struct plx_comm *c, struct plx__agree *a, int k, uint64_t now, int *ticket)
{
    char *mask = malloc((size_t)c->size);
    if (!mask)
        return plx__err(PLX_ERR_NOMEM, "out of memory");
    int unknown = 0;
    for (int i = 0; i < c->size; i++) {
        int p = place(a->st, i, now, a->wait_ns);
        unknown += p < 0;
        mask[i] = p > 0 ? '1' : '0';
    }
    int rc = 0;
    if (!unknown && !*ticket) {
        char key[512];
        int64_t t = 0;
        snprintf(key, sizeof key, "%s/ticket/%d", a->ns, k);
        if ((rc = plx__store_add(c->store, key, 1, &t)) == 0)
            *ticket = t == 1 ? 1 : 2;
        snprintf(key, sizeof key, "%s/decision/%d", a->ns, k);
        if (rc == 0 && t == 1)
            rc = plx__store_set(c->store, key, mask, (size_t)c->size);
    }
    free(mask);
    return rc;
}

/* Skip round k: its decider never wrote, or its set failed to build. */
static int bump(struct plx_comm *c, const char *ns, int k)
{
    char key[512];
    int64_t v = 0;
    snprintf(key, sizeof key, "%s/bump/%d", ns, k);
    int rc = plx__store_add(c->store, key, 1, &v);
    if (rc == 0 && v == 1) {
        snprintf(key, sizeof key, "%s/round", ns);
        rc = plx__store_add(c->store, key, 1, &v);
    }
    return rc;
}

static int current_round(struct plx_comm *c, const char *ns, int *k)
{
    char key[512];
    int64_t v = 0;
    snprintf(key, sizeof key, "%s/round", ns);
    int rc = plx__store_add(c->store, key, 0, &v);
    *k = (int)v;
    return rc;
}

/* An observer that was not looking for a while (it built a communicator,
 * or the machine stalled it) cannot tell a silent rank from one it did not
 * watch: every rank starts a new wait. */
static void watch(struct agree_state *st, uint64_t now, int64_t wait_ns)
{
    if (now - st->watched_ns > (uint64_t)wait_ns / 2)
        for (int i = 0; i < st->c->size; i++)
            st->changed_ns[i] = now;
    st->watched_ns = now;
}

/* Every member of round k's decision confirms it is still there before
 * any builds the communicator: a member that died after the decision
 * costs a wait, not a failed rendezvous. 0: all confirmed; 1: the round
 * was given up (a member went silent), decide again. */
static int confirm(struct plx_comm *c, struct plx__agree *a, int k)
{
    char key[512];
    snprintf(key, sizeof key, "%s/ack/%d/%d", a->ns, k, c->rank);
    int rc = plx__store_set(c->store, key, "1", 1);
    for (int now_k = k; rc == 0; rc = current_round(c, a->ns, &now_k)) {
        if (now_k != k) {
            a->st->min_round = k + 1;
            return 1;
        }
        uint64_t now = plx__clock_ns();
        watch(a->st, now, a->wait_ns);
        int missing = 0, silent = 0;
        for (int i = 0; i < c->size; i++) {
            snprintf(key, sizeof key, "%s/ack/%d/%d", a->ns, k, i);
            if (!a->alive[i] || c->store->ops->check(c->store, key) == 1)
                continue;
            missing++;
            silent += place(a->st, i, now, a->wait_ns) == 0;
        }
        if (!missing)
            return 0;
        if (silent && (rc = bump(c, a->ns, k)) != 0)
            break;
        if (now > a->deadline_ns)
            return plx__err(PLX_ERR_TIMEOUT, "rank %d: %d of the agreed survivors never confirmed (round %d)",
                            c->rank, missing, k);
        sleep_ns(POLL_NS);
    }
    return rc;
}

static int agree_loop(struct plx_comm *c, struct plx__agree *a)
{
    int seen = -1, ticket = 0, rc;
    uint64_t ticket_ns = 0;
    for (;;) {
        int k;
        if ((rc = current_round(c, a->ns, &k)) != 0)
            return rc;
        if ((rc = publish_dead(a->st)) != 0)
            return rc;
        uint64_t now = plx__clock_ns();
        watch(a->st, now, a->wait_ns);
        if (k >= a->st->min_round) {
            if (k != seen) {
                seen = k;
                ticket = 0;
            }
            if (read_decision(c, a, k)) {
                if (!a->alive[c->rank])
                    return plx__err(PLX_ERR_PEER_LOST, "the other ranks agreed on the survivors without rank %d "
                                    "(it came later than [core] shrink_wait_ms, or stopped answering)", c->rank);
                if ((rc = confirm(c, a, k)) <= 0)
                    return rc;
                continue;
            }
            int had = ticket;
            if ((rc = try_decide(c, a, k, now, &ticket)) != 0)
                return rc;
            if (ticket && !had)
                ticket_ns = now;
            if (ticket == 2 && now - ticket_ns > (uint64_t)a->wait_ns && (rc = bump(c, a->ns, k)) != 0)
                return rc;
        }
        if (now > a->deadline_ns)
            return plx__err(PLX_ERR_TIMEOUT, "rank %d: no agreement on the survivors within the timeout "
                            "(round %d)", c->rank, k);
        sleep_ns(POLL_NS);
    }
}

int plx__agree_alive(struct plx_comm *c, struct plx__agree *a)
{
    int rc;
    if (!a->st && (rc = start(c, a)) != 0)
        return rc;
    return agree_loop(c, a);
}

int plx__agree_retry(struct plx_comm *c, struct plx__agree *a)
{
    a->st->min_round = a->round + 1;
    return bump(c, a->ns, a->round);
}
