/* The rendezvous of a Slurm step from Slurm's variables: the first host of
 * the step's host list, a port all tasks derive alike and two steps of one
 * job do not share, and explicit MASTER_ADDR/PLEXUS_INIT winning over it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bootstrap.h"
#include "check.h"

static int failures;

static void slurm_step(const char *procid, const char *ntasks, const char *job, const char *step, const char *nodes)
{
    const char *vars[] = {"RANK", "WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "PMI_RANK",
                          "PMI_SIZE", "MASTER_ADDR", "MASTER_PORT", "PLEXUS_INIT", "TORCHELASTIC_USE_AGENT_STORE",
                          "PMIX_NAMESPACE", "PMIX_RANK"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
        unsetenv(vars[i]);
    setenv("SLURM_PROCID", procid, 1);
    setenv("SLURM_NTASKS", ntasks, 1);
    setenv("SLURM_JOB_ID", job, 1);
    setenv("SLURM_STEP_ID", step, 1);
    setenv("SLURM_STEP_NODELIST", nodes, 1);
}

static int first(const char *list, const char *want)
{
    char h[64];
    int rc = plx__slurm_first_host(list, h, sizeof h);
    if (!want)
        return rc != 0;
    return rc == 0 && !strcmp(h, want);
}

int main(void)
{
    struct plx_comm_options o;
    struct plx__rendezvous r;
    char url[512];
    plx_comm_options_init(&o);

    /* Slurm's hostlist syntax. */
    CHECK(first("vm", "vm"));
    CHECK(first("node07,node08", "node07"));
    CHECK(first("node[007-012,020]", "node007"));
    CHECK(first("gpu[3,5-6],cpu[1-2]", "gpu3"));
    CHECK(first("rack[2-3]-n[04-05]", "rack2-n04"));
    CHECK(first("a-1.example.org", "a-1.example.org"));
    CHECK(first("", NULL));
    CHECK(first("node[1-2", NULL));
    CHECK(first("node]1", NULL));

    /* Every task of a step computes one url; rank 0 hosts it. */
    slurm_step("1", "4", "4711", "0", "n[12-13]");
    CHECK(plx__rendezvous_resolve(&o, &r) == 0);
    CHECK(r.rank == 1 && r.size == 4 && !strcmp(r.source, "Slurm") && !strcmp(r.bootstrap, "Slurm"));
    snprintf(url, sizeof url, "tcp://n12:%d", plx__slurm_port(4711, 0));
    CHECK(!strcmp(r.url, url));
    slurm_step("3", "4", "4711", "0", "n[12-13]");
    CHECK(plx__rendezvous_resolve(&o, &r) == 0 && !strcmp(r.url, url));

    /* Two steps of one job (and a job's step against its neighbour's). */
    CHECK(plx__slurm_port(4711, 0) != plx__slurm_port(4711, 1));
    CHECK(plx__slurm_port(4711, 1) != plx__slurm_port(4711, 2));
    CHECK(plx__slurm_port(4711, 0) != plx__slurm_port(4712, 0));
    for (unsigned long s = 0; s < 64; s++)
        CHECK(plx__slurm_port(4711, s) >= 1024 && plx__slurm_port(4711, s) < 65536);

    /* srun --mpi=pmi2 also sets PMI_RANK/PMI_SIZE: the Slurm store still. */
    slurm_step("2", "4", "9", "1", "vm");
    setenv("PMI_RANK", "2", 1);
    setenv("PMI_SIZE", "4", 1);
    CHECK(plx__rendezvous_resolve(&o, &r) == 0 && !strcmp(r.bootstrap, "Slurm") && !strncmp(r.url, "tcp://vm:", 9));

    /* mpirun inside an allocation: its tasks inherit a step's variables
     * that are not theirs, so no Slurm store. */
    slurm_step("0", "1", "9", "0", "vm");
    setenv("OMPI_COMM_WORLD_RANK", "1", 1);
    setenv("OMPI_COMM_WORLD_SIZE", "2", 1);
    CHECK(plx__rendezvous_resolve(&o, &r) == 0 && r.url[0] == '\0' && !strcmp(r.bootstrap, "none"));
    CHECK(strstr(r.why, "SLURM_PROCID=0") != NULL);

    /* Explicit MASTER_ADDR and PLEXUS_INIT win. */
    slurm_step("0", "2", "9", "0", "vm");
    setenv("MASTER_ADDR", "10.1.2.3", 1);
    setenv("MASTER_PORT", "29500", 1);
    CHECK(plx__rendezvous_resolve(&o, &r) == 0 && !strcmp(r.url, "tcp://10.1.2.3:29500"));
    setenv("PLEXUS_INIT", "file:///tmp/x", 1);
    CHECK(plx__rendezvous_resolve(&o, &r) == 0 && !strcmp(r.url, "file:///tmp/x"));

    /* A step list plexus cannot read: no store, and why says so. */
    slurm_step("0", "2", "9", "0", "node[1-");
    CHECK(plx__rendezvous_resolve(&o, &r) == 0 && r.url[0] == '\0' && strstr(r.why, "node[1-") != NULL);

    /* plx_bootstrap_describe tells the same story. */
    slurm_step("1", "2", "77", "3", "vm");
    char d[1024];
    CHECK(plx_bootstrap_describe(NULL, d, sizeof d) == 0);
    CHECK(strstr(d, "rank 1 of 2") && strstr(d, "Slurm step 77.3") && strstr(d, "tcp://vm:"));

    if (failures)
        fprintf(stderr, "%d check(s) failed\n", failures);
    return failures ? 1 : 0;
}
