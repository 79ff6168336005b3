/* Rank, size and store url resolution from options and launcher variables. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bootstrap.h"
#include "check.h"

static int failures;
static void clear_env(void)
{
    const char *vars[] = {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
                          "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
                          "OMPI_COMM_WORLD_LOCAL_SIZE", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID",
                          "MPI_LOCALNRANKS", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID",
                          "SLURM_NTASKS_PER_NODE", "PLEXUS_INIT"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
        unsetenv(vars[i]);
}

int main(void)
{
    struct plx_comm_options o;
    struct plx__rendezvous r;

    clear_env();
    plx_comm_options_init(&o);
    CHECK(plx__rendezvous_resolve(&o, &r) == 0);
    CHECK(r.rank == 0 && r.size == 1 && !strncmp(r.url, "mem://solo-", 11));
    CHECK(!strcmp(r.source, "default"));
    /* A size the caller gave, without a rank, is named as the caller's. */
    o.size = 0;
    CHECK(plx__rendezvous_resolve(&o, &r) == PLX_ERR_INVALID_ARG);
    CHECK(strstr(plx_last_error(), "size=0: a world needs at least one rank (from options)") != NULL);
    o.size = 2;
    CHECK(plx__rendezvous_resolve(&o, &r) == 0 && r.rank == 0 && r.size == 2 && !strcmp(r.source, "options"));
    plx_comm_options_init(&o);

    /* torchrun */
    setenv("RANK", "2", 1);
    setenv("WORLD_SIZE", "4", 1);
    setenv("LOCAL_RANK", "0", 1);
    setenv("LOCAL_WORLD_SIZE", "2", 1);
    setenv("MASTER_ADDR", "127.0.0.1", 1);
    setenv("MASTER_PORT", "29500", 1);
    CHECK(plx__rendezvous_resolve(&o, &r) == 0);
    CHECK(r.rank == 2 && r.size == 4 && r.local_rank == 0 && r.local_size == 2);
    CHECK(!strcmp(r.url, "tcp://127.0.0.1:29500"));
    CHECK(!strcmp(r.source, "torchrun"));
    CHECK(!r.client_only && !r.key_prefix[0]);

    /* torchrun's elastic agent hosts the store: join as a client, under the attempt's prefix */
    setenv("TORCHELASTIC_USE_AGENT_STORE", "True", 1);
    setenv("TORCHELASTIC_RESTART_COUNT", "3", 1);
    CHECK(plx__rendezvous_resolve(&o, &r) == 0);
    CHECK(r.client_only && !strcmp(r.url, "tcp://127.0.0.1:29500"));
    CHECK(!strcmp(r.key_prefix, "//worker/attempt_3")); /* torch's TCPStore client adds the first '/' */
    unsetenv("TORCHELASTIC_RESTART_COUNT");
    CHECK(plx__rendezvous_resolve(&o, &r) == PLX_ERR_INVALID_ARG);
    CHECK(strstr(plx_last_error(), "TORCHELASTIC_RESTART_COUNT") != NULL);
    setenv("TORCHELASTIC_RESTART_COUNT", "0", 1);
    o.init = "file:///tmp/elsewhere"; /* an explicit init wins over the agent's store */
    CHECK(plx__rendezvous_resolve(&o, &r) == 0);
    CHECK(!r.client_only && !strcmp(r.url, "file:///tmp/elsewhere"));
    o.init = NULL;
    setenv("TORCHELASTIC_USE_AGENT_STORE", "False", 1);
    CHECK(plx__rendezvous_resolve(&o, &r) == 0);
    CHECK(!r.client_only && !r.key_prefix[0]);
    unsetenv("TORCHELASTIC_USE_AGENT_STORE");
    unsetenv("TORCHELASTIC_RESTART_COUNT");

    /* options beat the environment; PLEXUS_INIT beats MASTER_* */
    o.rank = 1;
    o.size = 3;
    o.init = "file:///tmp/x";
    CHECK(plx__rendezvous_resolve(&o, &r) == 0);
    CHECK(r.rank == 1 && r.size == 3 && !strcmp(r.url, "file:///tmp/x"));
    plx_comm_options_init(&o);
    setenv("PLEXUS_INIT", "tcp://10.0.0.1:1234", 1);
    CHECK(plx__rendezvous_resolve(&o, &r) == 0);
    CHECK(!strcmp(r.url, "tcp://10.0.0.1:1234"));

    /* bad values are errors that name the variable */
    clear_env();
    setenv("RANK", "x1", 1);
    setenv("WORLD_SIZE", "4", 1);
    CHECK(plx__rendezvous_resolve(&o, &r) == PLX_ERR_INVALID_ARG);
    CHECK(strstr(plx_last_error(), "RANK='x1'") != NULL);
    setenv("RANK", "4", 1);
    CHECK(plx__rendezvous_resolve(&o, &r) == PLX_ERR_INVALID_ARG);
    CHECK(strstr(plx_last_error(), "RANK=4 is not below WORLD_SIZE=4") != NULL);
    clear_env();
    setenv("RANK", "1", 1);
    CHECK(plx__rendezvous_resolve(&o, &r) == PLX_ERR_INVALID_ARG);
    CHECK(strstr(plx_last_error(), "WORLD_SIZE is not") != NULL);

    /* Open MPI and MPICH launchers; no store url (the backend bootstraps) */
    clear_env();
    setenv("OMPI_COMM_WORLD_RANK", "1", 1);
    setenv("OMPI_COMM_WORLD_SIZE", "2", 1);
    CHECK(plx__rendezvous_resolve(&o, &r) == 0);
    CHECK(r.rank == 1 && r.size == 2 && !strcmp(r.source, "Open MPI") && r.url[0] == '\0');
    clear_env();
    setenv("PMI_RANK", "3", 1);
    setenv("PMI_SIZE", "4", 1);
    CHECK(plx__rendezvous_resolve(&o, &r) == 0);
    CHECK(r.rank == 3 && !strcmp(r.source, "MPICH"));
    o.init = "env://";
    CHECK(plx__rendezvous_resolve(&o, &r) == PLX_ERR_INVALID_ARG);
    CHECK(strstr(plx_last_error(), "MASTER_ADDR") != NULL);

    /* every launcher variable checked at the door, named in the error */
    plx_comm_options_init(&o);
    clear_env();
    setenv("RANK", "0", 1);
    setenv("WORLD_SIZE", "2", 1);
    setenv("MASTER_ADDR", "127.0.0.1", 1);
    const char *bad_ports[] = {"70000", "abc", "0", "-1", " 29500", "29500x", "65536"};
    for (size_t i = 0; i < sizeof bad_ports / sizeof bad_ports[0]; i++) {
        setenv("MASTER_PORT", bad_ports[i], 1);
        CHECK(plx__rendezvous_resolve(&o, &r) == PLX_ERR_INVALID_ARG);
        CHECK(strstr(plx_last_error(), "MASTER_PORT") != NULL);
    }
    setenv("MASTER_PORT", "65535", 1);
    CHECK(plx__rendezvous_resolve(&o, &r) == 0 && !strcmp(r.url, "tcp://127.0.0.1:65535"));
    o.init = "file:///tmp/x"; /* MASTER_PORT is not read: not checked */
    setenv("MASTER_PORT", "abc", 1);
    CHECK(plx__rendezvous_resolve(&o, &r) == 0);
    o.init = NULL;
    setenv("MASTER_PORT", "29500", 1);
    setenv("LOCAL_RANK", "2", 1);
    setenv("LOCAL_WORLD_SIZE", "2", 1);
    CHECK(plx__rendezvous_resolve(&o, &r) == PLX_ERR_INVALID_ARG);
    CHECK(strstr(plx_last_error(), "LOCAL_RANK=2 is not below LOCAL_WORLD_SIZE=2") != NULL);
    setenv("LOCAL_RANK", "0", 1);
    setenv("LOCAL_WORLD_SIZE", "3", 1);
    CHECK(plx__rendezvous_resolve(&o, &r) == PLX_ERR_INVALID_ARG);
    CHECK(strstr(plx_last_error(), "LOCAL_WORLD_SIZE=3 exceeds WORLD_SIZE=2") != NULL);
    setenv("LOCAL_WORLD_SIZE", "2", 1);
    setenv("RANK", "+1", 1);
    CHECK(plx__rendezvous_resolve(&o, &r) == PLX_ERR_INVALID_ARG);
    CHECK(strstr(plx_last_error(), "RANK='+1'") != NULL);
    setenv("RANK", "2", 1);
    CHECK(plx__rendezvous_resolve(&o, &r) == PLX_ERR_INVALID_ARG);
    CHECK(strstr(plx_last_error(), "RANK=2 is not below WORLD_SIZE=2") != NULL);
    setenv("RANK", "0", 1);
    setenv("WORLD_SIZE", "0", 1);
    CHECK(plx__rendezvous_resolve(&o, &r) == PLX_ERR_INVALID_ARG);
    CHECK(strstr(plx_last_error(), "WORLD_SIZE=0") != NULL);
    clear_env();
    /* a step smaller than its allocation inherits the allocation's tasks per node */
    setenv("SLURM_PROCID", "1", 1);
    setenv("SLURM_NTASKS", "2", 1);
    setenv("SLURM_NTASKS_PER_NODE", "4", 1);
    CHECK(plx__rendezvous_resolve(&o, &r) == 0 && r.local_size == 2);
    setenv("SLURM_LOCALID", "1", 1);
    setenv("SLURM_NTASKS_PER_NODE", "1", 1);
    CHECK(plx__rendezvous_resolve(&o, &r) == PLX_ERR_INVALID_ARG);
    CHECK(strstr(plx_last_error(), "SLURM_LOCALID=1 is not below SLURM_NTASKS_PER_NODE=1") != NULL);
    unsetenv("SLURM_LOCALID");
    unsetenv("SLURM_NTASKS_PER_NODE");
    clear_env();

    if (failures)
        fprintf(stderr, "%d check(s) failed\n", failures);
    return failures ? 1 : 0;
}
