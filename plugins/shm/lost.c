/* lost.c - the lost-ranks hint (ABI 1.7 comm_lost_ranks): the peers whose
 * process this rank sees gone, by the same test the waits make (pidfd,
 * else kill(pid, 0) and its /proc state). A process that is gone cannot
 * take part in a shrink, so the core's agreement stops waiting for it. One
 * that left the communicator first (destroyed it, then exited) did not die
 * in it: the ABI says such a rank is not listed. */
#include "shm.h"

int shm__lost_ranks(void *comm, unsigned char *dead, int size)
{
    struct shm_comm *c = comm;
    int n = 0;
    for (int r = 0; r < c->size && r < size; r++)
        if (r != c->rank && __atomic_load_n(&shm__ctl(c, r)->state, __ATOMIC_ACQUIRE) != SHM_STATE_LEFT &&
            shm__peer_dead(c, r)) {
            dead[r] = 1;
            n++;
        }
    return n;
}
