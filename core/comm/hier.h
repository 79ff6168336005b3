/* hier.h - hierarchical collectives (an intra-host backend composed with an
 * inter-host one by the core); see hier.c. Stability: internal. */
#ifndef PLX_CORE_HIER_H
#define PLX_CORE_HIER_H

#include "comm.h"

/* Choose the backends for spec: "INTRA+INTER" gives both (the communicator
 * runs on inter, *intra is set); anything else is plx__loader_select's
 * (and *intra NULL). spec NULL: the configured [core] backend. place
 * (PLX__PLACE_*) orders auto; why (wn bytes) gets the choice in words. */
int plx__hier_select(const struct plx_config *v, const char *spec, int place, struct plx__backend **inter,
                     struct plx__backend **intra, char *why, size_t wn);
/* Build c's intra and cross children (collective over c, which runs on the
 * inter backend). Errors leave c flat; PLX_ERR_UNSUPPORTED (hosts of
 * unequal size, or too many) is decided alike on every rank before any
 * child exists, so the caller may go on flat. */
int plx__hier_setup(struct plx_comm *c, struct plx__backend *intra_be);
/* 1 if the hierarchy runs a (host memory, a covered collective). */
int plx__hier_wants(const struct plx_comm *c, const struct plx_coll_args *a);
/* Run a to completion in the calling thread; fp is the user's call (a may
 * be rewritten), checked on every rank before the steps. */
int plx__hier_run(struct plx_comm *c, const struct plx_coll_args *a, const struct plx__fp *fp);
/* The same, for the executor (blocking calls run it in the caller's thread,
 * nonblocking ones in the executor's, in issue order): a failure's message
 * goes to errmsg and fails c. */
int plx__hier_run_failing(struct plx_comm *c, const struct plx_coll_args *a, const struct plx__fp *fp, char *errmsg,
                          size_t errlen);
void plx__hier_abort(struct plx_comm *c);
/* Revoke c's intra and cross children (where their backends can). */
int plx__hier_revoke(struct plx_comm *c);
void plx__hier_destroy(struct plx_comm *c);
/* The backend c's hierarchy runs inside hosts (shrink.c composes a shrunk
 * communicator of the same), or NULL when c is flat. */
struct plx__backend *plx__hier_intra_backend(const struct plx_comm *c);
/* "intra+inter" (as `backend = shm+tcp` names it) for a hierarchical c, else NULL. */
const char *plx__hier_name(const struct plx_comm *c);

#endif
