/* agree.h - the survivors of a communicator agree, through its store, on
 * which of its ranks are alive (agree.c), without the dead ranks' help.
 * Stability: internal. */
#ifndef PLX_CORE_AGREE_H
#define PLX_CORE_AGREE_H

#include <stdint.h>

struct plx_comm;

struct plx__agree {
    const char *ns;       /* keys under c's store: the same on every survivor */
    int64_t wait_ns;      /* a rank absent this long, or silent this long in the agreement, counts as failed */
    uint64_t deadline_ns; /* plx__clock_ns() time when the whole agreement gives up */
    unsigned char *alive; /* out: c->size bytes, 1 for each rank in the agreed set */
    int round;            /* out: the round that decided (its keys are the new communicator's) */
    struct agree_state *st; /* this rank's heartbeat and view of the others (agree.c) */
};

/* Every survivor of c calls it with the same ns: 0 and a->alive, the same
 * set on every rank that gets 0. PLX_ERR_PEER_LOST when the others agreed
 * on a set without this rank (it came too late), PLX_ERR_TIMEOUT at the
 * deadline, a store error if the store is gone. The heartbeat goes on until
 * plx__agree_end, so that a rank building the agreed communicator stays
 * alive in the eyes of the others. */
int plx__agree_alive(struct plx_comm *c, struct plx__agree *a);
/* The agreed set of round a->round failed to become a communicator (a
 * member died since): every survivor moves on to the next round, and a
 * following plx__agree_alive decides again. */
int plx__agree_retry(struct plx_comm *c, struct plx__agree *a);
/* Stops the heartbeat. */
void plx__agree_end(struct plx__agree *a);

#endif
