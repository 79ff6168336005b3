/* kill.h - what kill_loop.c (the harness) and kill_rank.c (a rank) share:
 * the iteration's plan and each rank's report, in memory shared across fork. */
#ifndef PLEXUS_TEST_KILL_H
#define PLEXUS_TEST_KILL_H

#include <stdint.h>

#define KILL_RANKS 4

/* Where a rank is; the victim dies in one of INIT, COLL, SPLIT, DESTROY. */
enum kill_phase { PH_START, PH_INIT, PH_COLL, PH_SPLIT, PH_CHILD, PH_BARRIER, PH_DESTROY, PH_RECOVER, PH_DONE };

struct kill_report {
    volatile int phase;      /* where the rank is now */
    double phase_s;          /* now_s() when it entered that phase */
    double phase_ms[PH_DONE + 1]; /* how long each finished phase took */
    /* the victim */
    int killed_phase, killed_at_end;
    double kill_s;           /* now_s() just before the SIGKILL */
    /* a survivor */
    int err_rc, err_phase;   /* its first failed operation */
    double err_s, err_phase_s; /* when it failed; when it had entered that phase */
    char err_msg[700];
    int refuse_checked, refuse_rc; /* new work on the failed communicator */
    double refuse_ms;
    char refuse_msg[400];
    int recover_rc;          /* the new communicator of the survivors */
    char recover_msg[400];
    int wrong;               /* a checked result was wrong */
    int finished;            /* ran its whole program without an error */
};

struct kill_shared {
    struct kill_report r[KILL_RANKS];
};

struct kill_iter {
    struct kill_shared *sh;
    uint64_t seed;           /* the same on every rank: sizes and dtypes agree */
    int victim, kill_phase;  /* victim -1: nobody dies (a calibration run) */
    double delay_s;          /* into kill_phase */
    int port, port2;         /* the world's store, the survivors' store */
    int64_t timeout_ms;
};

const char *kill_phase_name(int phase);
/* The program of one rank (procs_start's fn); arg is a struct kill_iter. */
int kill_rank_main(int rank, void *arg);

#endif
