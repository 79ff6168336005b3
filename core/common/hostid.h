/* hostid.h - what makes ranks "on the same host" for shared memory.
 *
 * Stability: internal (built into the core and the shm plugin).
 *
 * One line naming the kernel instance and the namespaces shared memory
 * depends on: the boot id (one kernel), the UTS host name, the inodes of
 * the network namespace (abstract Unix sockets live there; it is also what
 * tells two network namespaces on one machine apart, as in the two-"host"
 * tests) and of the PID namespace (pids that mean the same process), and
 * the uid (segments are private to it). Ranks whose lines are equal can
 * share a segment; the shm backend refuses a communicator otherwise and the
 * core groups ranks by it for hierarchical collectives. */
#ifndef PLEXUS_COMMON_HOSTID_H
#define PLEXUS_COMMON_HOSTID_H

#include <stddef.h>
#include <stdint.h>

/* Writes the identity line (NUL-terminated, at most len bytes). */
void plx_common_host_identity(char *out, size_t len);

/* The machine: its kernel's boot id, digested (never 0), or 0 where it
 * cannot be read. Ranks in different network namespaces or containers of
 * one machine share it, and so its cores (tcp's spin counts them). */
uint64_t plx_common_machine_id(void);

/* The CPUs this process may run on (sched_getaffinity: taskset, cgroups'
 * cpusets), else the machine's online ones; at least 1. */
int plx_common_usable_cores(void);

/* A string's 64-bit digest (FNV-1a), the same on every rank: host
 * identities (hier.c), long parents' names (lineage.c), the machine. */
uint64_t plx__str_digest(const char *s);

#endif
