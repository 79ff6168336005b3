/* elastic.h - what shrink.c and grow.c share: a communicator rebuilt from
 * the ranks that are left (plx_comm_shrink) or with newcomers
 * (plx_comm_grow, plx_comm_join), over comm's plx__comm_rebuild; the
 * survivors agree through the store first (agree.h). Nothing below this
 * layer calls into it. Stability: internal. */
#ifndef PLX_CORE_ELASTIC_H
#define PLX_CORE_ELASTIC_H

#include <stdint.h>

struct plx_comm;

/* shrink.c: why c cannot be rebuilt (what: the caller's name), 0 if it
 * can; [core] shrink_wait_ms in ns through c's options. */
int plx__rebuild_refusal(const struct plx_comm *c, const char *what);
int64_t plx__rebuild_wait_ns(struct plx_comm *c);

#endif
