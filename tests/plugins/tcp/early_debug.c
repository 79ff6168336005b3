/* early_debug.c - PLEXUS_DEBUG=tcp turns on the tcp backend's debug lines
 * (its log category is "tcp 'NAME'": the backend and the communicator), and
 * a payload that came before its receive was posted is counted and reported
 * when the communicator is destroyed (it was copied twice).
 *
 * Rank 0 sends 1 KiB (eager) to rank 1, which posts its receive 300 ms
 * later; both then check the data and destroy the communicator. The script
 * (early_debug.sh) checks the log. Run with plexus-run -n 2. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "plexus/plexus.h"

int main(void)
{
    struct plx_comm_options o;
    plx_comm_options_init(&o);
    o.backend = "tcp";
    struct plx_comm *c;
    if (plx_comm_init(&o, &c) != 0) {
        fprintf(stderr, "early_debug: %s\n", plx_last_error());
        return 1;
    }
    int rank = plx_comm_rank(c), rc = 0;
    char buf[1024];
    if (rank == 0) {
        memset(buf, 7, sizeof buf);
        rc = plx_send(c, buf, sizeof buf, PLX_U8, 1, 5);
    } else if (rank == 1) {
        struct timespec ts = {0, 300000000};
        nanosleep(&ts, NULL);
        memset(buf, 0, sizeof buf);
        rc = plx_recv(c, buf, sizeof buf, PLX_U8, 0, 5);
        for (size_t i = 0; i < sizeof buf && !rc; i++)
            if (buf[i] != 7) {
                fprintf(stderr, "early_debug: byte %zu is %d, not 7\n", i, buf[i]);
                rc = 1;
            }
    }
    if (!rc)
        rc = plx_barrier(c);
    if (rc)
        fprintf(stderr, "early_debug: rank %d: %s\n", rank, plx_last_error());
    plx_comm_destroy(c);
    return rc != 0;
}
