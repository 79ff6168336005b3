/* The choice of the PMI bootstrap from the environment a PMI process
 * manager (Hydra, srun --mpi=pmi2) gives its processes: taken when PMI_FD
 * is set and PMI_RANK is this rank, passed over when not, after PMIx and
 * before Slurm's derived port, explicit MASTER_ADDR/PLEXUS_INIT winning.
 * The exchange itself runs under real mpirun.mpich (mpirun_hydra.sh). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bootstrap.h"
#include "check.h"

static int failures;

static void job(const char *rank, const char *size, const char *fd)
{
    const char *vars[] = {"RANK", "WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "MASTER_ADDR",
                          "MASTER_PORT", "PLEXUS_INIT", "TORCHELASTIC_USE_AGENT_STORE", "PMIX_NAMESPACE", "PMIX_RANK",
                          "SLURM_PROCID", "SLURM_NTASKS", "SLURM_JOB_ID", "SLURM_STEP_ID", "SLURM_STEP_NODELIST"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
        unsetenv(vars[i]);
    setenv("PMI_RANK", rank, 1);
    setenv("PMI_SIZE", size, 1);
    if (fd)
        setenv("PMI_FD", fd, 1);
    else
        unsetenv("PMI_FD");
}

int main(void)
{
    struct plx_comm_options o;
    struct plx__rendezvous r;
    plx_comm_options_init(&o);

    job("2", "4", "6");
    CHECK(plx__rendezvous_resolve(&o, &r) == 0 && r.rank == 2 && r.size == 4 && !strcmp(r.source, "MPICH"));
    CHECK(!strcmp(r.bootstrap, "PMI") && !strcmp(r.url, "pmi://6") && strstr(r.why, "PMI_FD=6"));
    char d[1024];
    CHECK(plx_bootstrap_describe(NULL, d, sizeof d) == 0 && strstr(d, "rendezvous: PMI at pmi://6"));

    /* Inside a Slurm step (srun --mpi=pmi2) PMI's exchange comes before the
     * derived port. */
    setenv("SLURM_PROCID", "2", 1);
    setenv("SLURM_NTASKS", "4", 1);
    setenv("SLURM_JOB_ID", "9", 1);
    setenv("SLURM_STEP_ID", "0", 1);
    setenv("SLURM_STEP_NODELIST", "vm", 1);
    CHECK(plx__rendezvous_resolve(&o, &r) == 0 && !strcmp(r.bootstrap, "PMI"));

    /* No PMI_FD (Hydra's -launcher without PMI, a plain PMI_RANK): passed over. */
    job("2", "4", NULL);
    CHECK(plx__rendezvous_resolve(&o, &r) == 0 && !strcmp(r.bootstrap, "none") && r.url[0] == '\0');
    /* Ranks from options that PMI_RANK contradicts: not ours. */
    job("2", "4", "6");
    o.rank = 1;
    o.size = 4;
    CHECK(plx__rendezvous_resolve(&o, &r) == 0 && !strcmp(r.bootstrap, "none"));
    o.rank = o.size = -1;
    job("2", "4", "x6");
    CHECK(plx__rendezvous_resolve(&o, &r) == 0 && !strcmp(r.bootstrap, "none"));

    /* Explicit settings win. */
    job("2", "4", "6");
    setenv("MASTER_ADDR", "10.1.2.3", 1);
    setenv("MASTER_PORT", "29500", 1);
    CHECK(plx__rendezvous_resolve(&o, &r) == 0 && !strcmp(r.url, "tcp://10.1.2.3:29500"));
    setenv("PLEXUS_INIT", "file:///tmp/x", 1);
    CHECK(plx__rendezvous_resolve(&o, &r) == 0 && !strcmp(r.url, "file:///tmp/x"));

    if (failures)
        fprintf(stderr, "%d check(s) failed\n", failures);
    return failures ? 1 : 0;
}
