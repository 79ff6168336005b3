/* resolve.h - getaddrinfo within a time limit.
 *
 * Stability: internal (built into the core and the tcp plugin).
 *
 * A host name's lookup can wait on a DNS server that never answers (the
 * resolver's own retries take tens of seconds); init's one deadline must
 * bound it too. A numeric address resolves at once; a name is looked up on a
 * thread of its own, which is left to finish alone if the time runs out. */
#ifndef PLEXUS_COMMON_RESOLVE_H
#define PLEXUS_COMMON_RESOLVE_H

#include <netdb.h>
#include <stdint.h>

/* getaddrinfo(host, port, hints, res), waiting at most timeout_ms (< 0: no
 * limit). Returns getaddrinfo's code; EAI_AGAIN with errno ETIMEDOUT when
 * the time ran out. */
int plx_common_resolve(const char *host, const char *port, const struct addrinfo *hints, int64_t timeout_ms,
                       struct addrinfo **res);

#endif
