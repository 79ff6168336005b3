/* callname.h - a collective call in the core's words, for messages that
 * name two calls that do not match: "allreduce(seq 12, f32, sum, count 8)".
 * Shared by the core and the plugins that check calls themselves. */
#ifndef PLX_COMMON_CALLNAME_H
#define PLX_COMMON_CALLNAME_H

#include <stddef.h>
#include <stdint.h>

/* Fields out of range print as "?" (a corrupt header stays readable). */
void plx__call_describe(int coll, uint64_t seq, int dtype, int op, uint64_t count, int root, char *out, size_t len);
/* 1 if the collective takes a reduction op / a root (what two calls must
 * agree on) / per-rank counts; from PLX_COLL_MAP (plexus.h). */
int plx__call_has_op(int coll);
int plx__call_has_root(int coll);
int plx__call_is_v(int coll);
/* 1 if every field names something real. */
int plx__call_valid(int coll, int dtype, int op);

#endif
