/* reduce.h - reduction kernels for every dtype x op, shared by the core's
 * algorithms and, through the host struct, by every plugin.
 * f16/bf16 reduce through f32 with round-to-nearest-even; AVG reduces like
 * SUM and the caller finishes with plx__scale_div(). Stability: internal. */
#ifndef PLX_CORE_REDUCE_H
#define PLX_CORE_REDUCE_H

#include <stddef.h>
#include <stdint.h>

#include "plexus/plugin.h"

/* 1 if op is defined on dtype: every op on integers, all but the bitwise
 * ones (BAND, BOR, BXOR) on floats; 0 also for values out of range. */
int plx__redop_takes(int dtype, int op);
/* out[i] = a[i] op b[i]. out may equal a or b. Returns 0 or
 * PLX_ERR_INVALID_ARG (also for a bitwise op on a float type). */
int plx__reduce3(void *out, const void *a, const void *b, size_t count, int dtype, int op);
/* inout[i] = inout[i] op in[i]. */
int plx__reduce(void *inout, const void *in, size_t count, int dtype, int op);
/* buf[i] /= divisor (integers truncate toward zero). */
int plx__scale_div(void *buf, size_t count, int dtype, uint64_t divisor);
/* dst[i] = (f32)src[i] / divisor, src f16 or bf16 (AVG's pre-division, avg_lowp.c). */
int plx__widen_div(float *dst, const void *src, size_t count, int dtype, uint64_t divisor);
/* dst[i] = src[i] rounded to nearest-even f16 or bf16. */
int plx__narrow(void *dst, const float *src, size_t count, int dtype);
/* memmove for bulk data (plexus/plugin.h says why it is not memmove). */
#define plx__copy plx_plugin_move
/* Conversions used by kernels, tests and the bench. */
float plx__f16_to_f32(uint16_t h);
uint16_t plx__f32_to_f16(float f);
float plx__bf16_to_f32(uint16_t h);
uint16_t plx__f32_to_bf16(float f);

#endif
