/* The choice of the PMIx bootstrap from the environment a PMIx server gives
 * its clients: taken when PMIX_RANK is this rank (before Slurm's derived
 * port), passed over when it is not, and explicit MASTER_ADDR/PLEXUS_INIT
 * winning over it. The exchange itself runs under real mpirun
 * (mpirun_pmix.sh). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bootstrap.h"
#include "check.h"

static int failures;

static void job(const char *rank, const char *size, const char *pmix_rank)
{
    const char *vars[] = {"RANK", "WORLD_SIZE", "PMI_RANK", "PMI_SIZE", "MASTER_ADDR", "MASTER_PORT", "PLEXUS_INIT",
                          "TORCHELASTIC_USE_AGENT_STORE", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_JOB_ID",
                          "SLURM_STEP_ID", "SLURM_STEP_NODELIST"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
        unsetenv(vars[i]);
    setenv("OMPI_COMM_WORLD_RANK", rank, 1);
    setenv("OMPI_COMM_WORLD_SIZE", size, 1);
    setenv("PMIX_NAMESPACE", "ns-4711", 1);
    setenv("PMIX_RANK", pmix_rank, 1);
}

int main(void)
{
    struct plx_comm_options o;
    struct plx__rendezvous r;
    plx_comm_options_init(&o);

    job("1", "4", "1");
    CHECK(plx__rendezvous_resolve(&o, &r) == 0 && r.rank == 1 && r.size == 4 && !strcmp(r.source, "Open MPI"));
    if (strstr(r.why, "without PMIx's header") || strstr(r.why, "libpmix")) {
        /* Not built with PMIx or no libpmix here: passed over, saying so. */
        CHECK(!strcmp(r.bootstrap, "none") && r.url[0] == '\0');
        printf("no PMIx here: %s\n", r.why);
    } else {
        CHECK(!strcmp(r.bootstrap, "PMIx") && !strcmp(r.url, "pmix://ns-4711") && strstr(r.why, "ns-4711"));
        /* Inside a Slurm step too, PMIx's exchange comes first. */
        setenv("SLURM_PROCID", "1", 1);
        setenv("SLURM_NTASKS", "4", 1);
        setenv("SLURM_JOB_ID", "9", 1);
        setenv("SLURM_STEP_ID", "0", 1);
        setenv("SLURM_STEP_NODELIST", "vm", 1);
        CHECK(plx__rendezvous_resolve(&o, &r) == 0 && !strcmp(r.bootstrap, "PMIx"));
        char d[1024];
        CHECK(plx_bootstrap_describe(NULL, d, sizeof d) == 0 && strstr(d, "rendezvous: PMIx at pmix://ns-4711"));
    }

    /* PMIX_RANK of another process (a launcher inside another's job passed
     * the outer job's variables on): not ours, and why says so. */
    job("1", "4", "3");
    CHECK(plx__rendezvous_resolve(&o, &r) == 0 && !strcmp(r.bootstrap, "none") && strstr(r.why, "PMIX_RANK=3"));
    job("1", "4", "x");
    CHECK(plx__rendezvous_resolve(&o, &r) == 0 && !strcmp(r.bootstrap, "none"));

    /* Explicit settings win. */
    job("1", "4", "1");
    setenv("MASTER_ADDR", "10.1.2.3", 1);
    setenv("MASTER_PORT", "29500", 1);
    CHECK(plx__rendezvous_resolve(&o, &r) == 0 && !strcmp(r.url, "tcp://10.1.2.3:29500"));
    setenv("PLEXUS_INIT", "file:///tmp/x", 1);
    CHECK(plx__rendezvous_resolve(&o, &r) == 0 && !strcmp(r.url, "file:///tmp/x"));

    /* No PMIx server: passed over. */
    job("1", "4", "1");
    unsetenv("PMIX_NAMESPACE");
    CHECK(plx__rendezvous_resolve(&o, &r) == 0 && !strcmp(r.bootstrap, "none") && strstr(r.why, "no PMIx server"));

    if (failures)
        fprintf(stderr, "%d check(s) failed\n", failures);
    return failures ? 1 : 0;
}
