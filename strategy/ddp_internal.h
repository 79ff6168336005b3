/* ddp_internal.h - state shared by ddp.c (steps), ddp_buckets.c (layout,
 * storage, copies) and ddp_hooks.c (communication hooks). Stability: internal. */
#ifndef PLX_STRATEGY_DDP_INTERNAL_H
#define PLX_STRATEGY_DDP_INTERNAL_H

#include <pthread.h>
#include <stddef.h>

#include "plexus/strategy.h"

struct ddp_grad {
    void *ptr;      /* where the caller's gradient lives; equals its slot when it is a bucket view */
    size_t count;
    int dtype;
    int bucket;
    size_t off;      /* element offset inside its bucket */
    int ready;       /* marked ready or unused in this step */
    int unused;      /* marked unused in this step */
    int accumulated; /* holds a contribution from a NO_SYNC step since the last synchronised one */
};

struct ddp_bucket {
    int dtype;
    size_t count;
    size_t cap_bytes;
    void *buf;         /* flat storage; NULL when it holds one gradient reduced in place (no bucket view) */
    int first, n;      /* members: d->members[first .. first + n - 1] in bucket order */
    int pending;       /* members not ready yet this step */
    struct plx_work *work;
    int started;       /* launched this step */
};

struct plx_ddp {
    struct plx_comm *comm;
    struct plx_ddp_options opt;
    struct ddp_grad *grads;
    int ngrads, cap;
    int *members;      /* gradient indices grouped by bucket */
    struct ddp_bucket *buckets;
    int nbuckets;
    int laid_out;      /* bucket layout fixed */
    long steps;        /* steps begun */
    int next_launch;   /* OVERLAP: the first bucket not launched yet this step */
    int mode, in_step;
    int step_error;    /* a launch failed in this step (plx_ddp_finish reports it) */
    struct plx_ddp_comm_hook hook; /* start NULL: allreduce */
    void *builtin;     /* state of a built-in hook, freed at destroy */
    pthread_mutex_t mu; /* orders plx_ddp_ready / plx_ddp_mark_unused */
};

/* ddp_buckets.c */
int plx__ddp_layout(struct plx_ddp *d);
void plx__ddp_free_layout(struct plx_ddp *d);
void *plx__ddp_slot(const struct plx_ddp *d, const struct ddp_grad *g);
void *plx__ddp_bucket_data(const struct plx_ddp *d, const struct ddp_bucket *k);
void plx__ddp_fill(struct plx_ddp *d, struct ddp_bucket *k);
void plx__ddp_unfill(struct plx_ddp *d, struct ddp_bucket *k);

/* ddp_hooks.c */
int plx__ddp_hook_start(struct plx_ddp *d, struct ddp_bucket *k);
int plx__ddp_hook_finish(struct plx_ddp *d, struct ddp_bucket *k);
void plx__ddp_hook_free(struct plx_ddp *d);

#endif
