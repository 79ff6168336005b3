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

/* Writes the identity line (NUL-terminated, at most len bytes). */
void plx_common_host_identity(char *out, size_t len);

#endif
