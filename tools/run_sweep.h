/* run_sweep.h - plexus-run's hold on every process of its job, however the
 * ranks started them (internal to plexus-run).
 *
 * Each rank's environment carries the job's mark (PLEXUS_RUN_JOB=<random>),
 * which its children inherit through sh -c wrappers, setsid and new process
 * groups. A sweep kills (SIGKILL) every process whose initial environment
 * holds the mark, with its process group. A watchdog process, detached from
 * plexus-run, sweeps when plexus-run dies without saying it is done
 * (SIGKILL, a crash): PR_SET_PDEATHSIG reaches direct children only. */
#ifndef PLEXUS_RUN_SWEEP_H
#define PLEXUS_RUN_SWEEP_H

#include <stddef.h>

/* The mark "PLEXUS_RUN_JOB=<32 hex digits>" into out. 0, or -1 when no
 * random bytes could be read. */
int run_mark_make(char *out, size_t len);

/* raw_len (at most 32) random bytes from getrandom as 2 * raw_len hex
 * digits and a NUL in out. 0 on success. */
int run_random_hex(char *out, size_t raw_len);

/* Kill every process of the job (see above), repeating while new ones
 * appear, for at most bound_ms. Returns how many marked processes its first
 * pass found (their process groups went with them). */
int run_sweep(const char *mark, int bound_ms);

/* Start the watchdog: a process of its own process group, not a child of
 * the caller, that sweeps with mark when the caller dies before
 * run_watchdog_done(). Returns a descriptor for run_watchdog_done(), or -1
 * with errno set. */
int run_watchdog_start(const char *mark);

/* Tell the watchdog the job ended cleanly (it exits without sweeping) and
 * close fd. */
void run_watchdog_done(int fd);

#endif
