/* procs.h - rank processes for the fault tests: fork N children that share
 * an anonymous memory block with the parent, and reap them against a
 * deadline, so a hang shows up as a count instead of a stuck test. */
#ifndef PLEXUS_TEST_PROCS_H
#define PLEXUS_TEST_PROCS_H

#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>

#define PROCS_MAX 16

struct procs {
    int n;
    pid_t pid[PROCS_MAX];
    int status[PROCS_MAX]; /* waitpid status, valid when reaped */
    int reaped[PROCS_MAX];
    int hung[PROCS_MAX];   /* still running at the deadline: SIGKILLed by procs_wait */
    double exit_s[PROCS_MAX]; /* now_s() when reaped */
};

/* Monotonic seconds; comparable between processes of one machine. */
double now_s(void);
/* A free TCP port on 127.0.0.1, below the ephemeral range where possible
 * (bound and closed: a small race with other programs, which shows as a
 * clear store error). -1 on failure. */
int free_port(void);
/* Zeroed memory shared with every child forked later; never freed. */
void *shared_alloc(size_t bytes);
/* Fork n children; child r runs fn(r, arg) and _exits with its result.
 * Returns 0, or -1 if a fork failed (the ones started are killed). */
int procs_start(struct procs *p, int n, int (*fn)(int rank, void *arg), void *arg);
/* Reap every child until deadline (now_s() seconds); those still running
 * then are SIGKILLed, reaped and marked hung. */
void procs_wait(struct procs *p, double deadline);
/* "exit 0", "signal 9 (Killed)", "hung": for messages. Static storage. */
const char *procs_describe(const struct procs *p, int r);
/* Print "PREFIXrank R: how it ended" to out for every child that hung or
 * did not exit 0; returns how many. */
int procs_bad_ends(const struct procs *p, FILE *out, const char *prefix);
/* Append a formatted line to a rank's report (log, cap bytes, in shared
 * memory); with failures non-NULL it also counts one failure there. */
void procs_report(char *log, size_t cap, int *failures, const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* Rank rank of size ranks on backend, through a tcp:// store on
 * 127.0.0.1:port (hosted by rank 0), timeout_ms for every operation:
 * plx_comm_init's status, and on failure a line "rank R: init: ..." in the
 * rank's report (counted as a failure). */
struct plx_comm;
int procs_open(int rank, int size, int port, const char *backend, int timeout_ms, char *log, size_t cap,
               int *failures, struct plx_comm **c);
/* The stuck-rank tests' run: allreduces #0-#5 (256 floats), with 1.2 s
 * before #5 so that its completion publishes this rank's position to the
 * store (at most once a diag_publish_ms, 1 s); a failure there is a line
 * "rank R: #I: ..." in the report, counted, and returns 1 (a status is 0
 * or negative). Then #6: rank `stop` stops itself with SIGSTOP first; the
 * others set *entered (shared) as they enter. y (256 floats) gets the
 * result; a line "rank R: #6: STATUS after S s: MESSAGE" goes to the
 * report. Returns #6's status, the seconds it took in *secs;
 * plx_last_error() still holds its message. */
int procs_stuck_at_6(struct plx_comm *c, int rank, int stop, int *entered, float *y, double *secs, char *log,
                     size_t cap, int *failures);

#endif
