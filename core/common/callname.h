/* callname.h - a collective call in the core's words, for messages that
 * name two calls that do not match: "allreduce(seq 12, f32, sum, count 8)".
 * Shared by the core and the plugins that check calls themselves. */
#ifndef PLX_COMMON_CALLNAME_H
#define PLX_COMMON_CALLNAME_H

#include <stddef.h>
#include <stdint.h>

#include "plexus/backend.h"

/* The names of a collective, dtype and reduction op ("?" out of range):
 * the one table behind plx_coll_name, plx_dtype_name and plx_redop_name
 * (core/base/names.c) and the plugins' messages. */
const char *plx__coll_str(int coll);
const char *plx__dtype_str(int dtype);
const char *plx__redop_str(int op);

/* Fields out of range print as "?" (a corrupt header stays readable). */
void plx__call_describe(int coll, uint64_t seq, int dtype, int op, uint64_t count, int root, char *out, size_t len);
/* 1 if the collective takes a reduction op / a root (what two calls must
 * agree on) / per-rank counts; from PLX_COLL_MAP (plexus.h). */
int plx__call_has_op(int coll);
int plx__call_has_root(int coll);
int plx__call_is_v(int coll);
/* 1 if every field names something real. */
int plx__call_valid(int coll, int dtype, int op);

/* A collective call as every rank must make it, its fingerprint (whether
 * the ranks agree is diag/'s to check). Fields that do not apply to the
 * kind are normalised (-1), so they never make two calls differ. */
struct plx__fp {
    uint64_t seq;
    uint64_t count;
    int32_t coll, dtype, op, root;
};

/* The user's call, before the core rewrites it (AVG as SUM, f16 as f32). */
struct plx__fp plx__fp_of(const struct plx_coll_args *a);
int plx__fp_equal(const struct plx__fp *x, const struct plx__fp *y);
uint32_t plx__fp_hash(const struct plx__fp *f);
/* "allreduce(seq 12, f32, sum, count 8)"; returns buf. */
char *plx__fp_format(const struct plx__fp *f, char *buf, size_t len);
/* "X on rank a does not match Y on rank b", the lower rank first so every
 * rank prints the same sentence. */
void plx__fp_mismatch_msg(const struct plx__fp *f1, int r1, const struct plx__fp *f2, int r2, char *msg, size_t len);

#endif
