/* A host that initialised MPI itself: plexus uses it through the plugin,
 * leaves it initialised, and MPI still works for the host afterwards. */
#include <mpi.h>
#include <stdio.h>

#include "plexus/plexus.h"

int main(int argc, char **argv)
{
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided); /* below MULTIPLE on purpose */
    int me, np;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &np);
    struct plx_comm_options o;
    plx_comm_options_init(&o);
    o.backend = BACKEND;
    struct plx_comm *c;
    int rc = plx_comm_init(&o, &c), bad = 0;
    if (rc) {
        fprintf(stderr, "rank %d: %s\n", me, plx_last_error());
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    double v = me + 1, sum = 0;
    rc = plx_allreduce(c, &v, &sum, 1, PLX_F64, PLX_SUM);
    bad |= rc || sum != np * (np + 1) / 2.0;
    plx_comm_destroy(c);
    plx_finalize(); /* must not finalize MPI: the host initialised it */
    int still = 0;
    MPI_Initialized(&still);
    int fin = 0;
    MPI_Finalized(&fin);
    bad |= !still || fin;
    int one = 1, total = 0;
    MPI_Allreduce(&one, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    bad |= total != np;
    if (me == 0)
        printf("host-initialised MPI: plexus allreduce %s, MPI usable after plexus: %s\n", sum == np * (np + 1) / 2.0 ? "ok" : "WRONG",
               total == np ? "yes" : "NO");
    MPI_Finalize();
    return bad;
}
