/* family.c - communicators related by split, and what their backends saw.
 *
 * A rank that dies often surfaces in a relative first. The victim dies
 * during a split; a survivor whose parent noticed gives up the child's
 * rendezvous; the other ranks then time out on that survivor, or see it
 * leave, and their errors name it instead of the rank that died. So when a
 * communicator fails by a loss or a timeout, the core asks every live
 * relative's backend what it has lost (comm_losses, ABI 1.2) and adds that
 * to the error. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "comm.h"
#include "host.h"

/* Every live communicator, linked by family_next; only under mu. */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct plx_comm *live;
static uint64_t next_family = 1;

/* A relative's connections are closed by the kernel when its peer dies, but
 * its I/O thread may not have read that yet when the failure it caused
 * reaches us: wait this long for a loss the error does not already say
 * (only on the error path, and only where a backend can tell). */
#define EXPLAIN_GRACE_NS 100000000u
#define EXPLAIN_POLL_NS 2000000

void plx__family_join(struct plx_comm *c, const struct plx_comm *parent)
{
    pthread_mutex_lock(&mu);
    c->family = parent ? parent->family : next_family++;
    c->family_next = live;
    live = c;
    pthread_mutex_unlock(&mu);
}

void plx__family_leave(struct plx_comm *c)
{
    pthread_mutex_lock(&mu);
    for (struct plx_comm **p = &live; *p; p = &(*p)->family_next) {
        if (*p == c) {
            *p = c->family_next;
            break;
        }
    }
    pthread_mutex_unlock(&mu);
}

/* Append to msg the "; "-separated items of seen that it does not already
 * say, as " [meanwhile on 'name': item; item]". */
static int append_new(char *msg, size_t len, const char *name, char *seen)
{
    char add[320];
    size_t n = 0;
    add[0] = '\0';
    for (char *item = seen, *next; item && *item; item = next) {
        next = strstr(item, "; ");
        if (next) {
            *next = '\0';
            next += 2;
        }
        if (!strstr(msg, item) && n + 1 < sizeof add) {
            snprintf(add + n, sizeof add - n, "%s%s", n ? "; " : "", item);
            n += strlen(add + n);
        }
    }
    size_t at = strlen(msg);
    if (!n || at + 1 >= len)
        return 0;
    snprintf(msg + at, len - at, " [meanwhile on '%s': %s]", name, add);
    return 1;
}

/* Append what c's relatives (c included) report to msg; *askable: how
 * many of them can say. Returns how many added something msg did not say. */
static int collect(const struct plx_comm *c, char *msg, size_t len, int *askable)
{
    int added = 0;
    *askable = 0;
    pthread_mutex_lock(&mu);
    for (struct plx_comm *r = live; r; r = r->family_next) {
        if (r->family != c->family || !r->be->ops.comm_losses)
            continue;
        ++*askable;
        char seen[320];
        seen[0] = '\0';
        if (r->be->ops.comm_losses(r->bc, seen, sizeof seen) <= 0 || !seen[0])
            continue;
        added += append_new(msg, len, r->name, seen);
    }
    pthread_mutex_unlock(&mu);
    return added;
}

void plx__family_explain(const struct plx_comm *c, int status, char *msg, size_t len)
{
    if ((status != PLX_ERR_PEER_LOST && status != PLX_ERR_TIMEOUT) || len == 0)
        return;
    uint64_t until = plx__clock_ns() + EXPLAIN_GRACE_NS;
    int askable;
    /* Nobody to ask (a backend without comm_losses): no wait. A loss in a
     * communicator without relatives is already named by its own error; a
     * timeout, or a loss among relatives, may be an echo worth waiting for. */
    while (collect(c, msg, len, &askable) == 0 && askable > 0 && (status == PLX_ERR_TIMEOUT || askable > 1) &&
           plx__clock_ns() < until) {
        struct timespec ts = {0, EXPLAIN_POLL_NS};
        nanosleep(&ts, NULL);
    }
}
