/* bootstrap.h - who this rank is and where the ranks meet: the launcher's
 * variables (rendezvous.c, launcher_*.c) and the job's store
 * (rendezvous_store.c). Nothing here needs a communicator: plx_comm_init
 * (comm.c) and the describe calls resolve through it. Stability: internal. */
#ifndef PLX_CORE_BOOTSTRAP_H
#define PLX_CORE_BOOTSTRAP_H

#include <stddef.h>
#include <stdint.h>

#include "plexus/plexus.h"

struct plx_config;
struct plx_store;

/* rendezvous.c: who am I and where do we meet. */
struct plx__rendezvous {
    int rank, size, local_rank, local_size;
    char url[512];   /* "" if no store (backend bootstraps itself) */
    const char *source; /* "options", "torchrun", "Open MPI", "MPICH", "Slurm", "default" */
    int client_only;     /* a launcher hosts the store at url (torchrun's agent) */
    char key_prefix[96]; /* "" or what every key goes under ("/worker/attempt_0") */
    const char *bootstrap; /* how url was found: "PLEXUS_INIT", "MASTER_ADDR", "Slurm", ... */
    char why[320];         /* that choice, and the ones passed over, in words */
    const char *const *vars; /* the launcher's rank, size, local rank, local size variables, or NULL */
    int place;               /* PLX__PLACE_*: one host, several, or not said */
};
int plx__rendezvous_resolve(const struct plx_comm_options *opt, struct plx__rendezvous *out);
/* MASTER_ADDR and MASTER_PORT as a store address: 0, or PLX_ERR_INVALID_ARG
 * naming the variable that is wrong. */
int plx__rendezvous_check_master(const char *addr, const char *port);
/* rendezvous.c: variable name as a launcher writes it (digits only, at most
 * max, nine digits at most) into out; -1 when unset or anything else. */
int plx__env_uint(const char *name, long max, long *out);

/* launcher_slurm.c: the first host of a Slurm host list ("n[07-09],m" ->
 * "n07"); 0, or -1 for a list it cannot read or a host longer than n. */
int plx__slurm_first_host(const char *list, char *out, size_t n);
/* The store port of step `step` of Slurm job `job`. */
int plx__slurm_port(unsigned long job, unsigned long step);
/* If r's rank and size are this Slurm step's task: the store url from
 * Slurm's variables into url, 1. Else 0. why says which, in words. */
int plx__rendezvous_slurm(const struct plx__rendezvous *r, char *url, size_t n, char *why, size_t wn);
/* launcher_pmix.c: if a PMIx server started this rank (and plexus can load
 * libpmix): r->url "pmix://NAMESPACE", 1. Else 0. r->why says which. */
int plx__rendezvous_pmix(struct plx__rendezvous *r);
/* The store url rank 0 published through PMIx (rank 0: hosts the store, with
 * the limits v gives, and publishes it); one fence of the whole job, once
 * per process. Every rank of the job must call it. */
int plx__pmix_store_url(const struct plx_config *v, const struct plx__rendezvous *rv, int64_t timeout_ms, char *url,
                        size_t n);
/* launcher_pmi.c: if a PMI process manager (Hydra, srun --mpi=pmi2) gave
 * this rank PMI_FD and its PMI_RANK is this rank: r->url "pmi://FD", 1.
 * Else 0. r->why says which. */
int plx__rendezvous_pmi(struct plx__rendezvous *r);
/* The store url rank 0 published in the job's PMI key-value space (rank 0:
 * hosts the store and publishes it); one barrier of the whole job, once
 * per process. Every rank of the job must call it. */
int plx__pmi_store_url(const struct plx_config *v, const struct plx__rendezvous *rv, int64_t timeout_ms, char *url,
                       size_t n);
/* launcher_store.c: rank 0 hosts the store on a port the kernel picks;
 * its url into url. who names the bootstrap in errors. */
int plx__launcher_host_store(const struct plx_config *cfg, const char *who, char *url, size_t n);
/* Rank 0: a fresh job secret (64 hex characters) into out, set as this
 * process's PLEXUS_JOB_SECRET, or "" when the user set one. */
int plx__launcher_secret_make(char *out, size_t n);
/* The others: rank 0's secret ("": none) becomes PLEXUS_JOB_SECRET unless one is set. */
int plx__launcher_secret_adopt(const char *secret);
/* rendezvous_store.c: open the job's store: the caller's callbacks
 * (opt->store), else rv->url (as a client only if rv->client_only), under
 * rv->key_prefix. *out NULL when there is no store. */
/* If torchrun's elastic agent hosts the store (TORCHELASTIC_USE_AGENT_STORE=
 * True) and init is env:// or unset: fill r's url, client_only and
 * key_prefix as torch's own workers use them and return 1; else 0, or an
 * error for an incomplete environment. */
int plx__rendezvous_torchelastic(const char *init, struct plx__rendezvous *r);
int plx__rendezvous_store_open(const struct plx_config *v, const struct plx_comm_options *opt,
                               const struct plx__rendezvous *rv, int rank, int size, int64_t timeout_ms,
                               struct plx_store **out);

#endif
