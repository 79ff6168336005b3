/* ckpt_data.h - the tensors the checkpoint tests save: names, shapes,
 * dtypes and a value for every global element, computed from integers so
 * they are exact in every dtype (ckpt_reader.py computes the same values
 * independently). */
#ifndef PLEXUS_TEST_CKPT_DATA_H
#define PLEXUS_TEST_CKPT_DATA_H

#include <stdint.h>
#include <string.h>

#include "plexus/plexus.h"

/* FSDP units: parameters (and an optimizer state for unit 0). Uneven
 * sizes, and one smaller than most world sizes, so shards are padded. */
enum { CK_UNITS = 4 };
static const char *const ck_unit_names[CK_UNITS] = {"layer1.weight", "layer1.bias", "layer2.weight", "layer2.bias"};
static const int ck_unit_dtypes[CK_UNITS] = {PLX_F32, PLX_F32, PLX_F64, PLX_F32};
static const int ck_unit_ndims[CK_UNITS] = {2, 1, 2, 1};
static const int64_t ck_unit_shape0[2] = {13, 7}, ck_unit_shape1[1] = {13}, ck_unit_shape2[2] = {5, 13},
                     ck_unit_shape3[1] = {1};
static const int64_t *const ck_unit_shapes[CK_UNITS] = {ck_unit_shape0, ck_unit_shape1, ck_unit_shape2,
                                                        ck_unit_shape3};
static const size_t ck_unit_counts[CK_UNITS] = {91, 13, 65, 1};
#define CK_MOMENTUM "layer1.weight.momentum" /* f32, sharded like unit 0 */

/* Replicated state: a step counter, a byte mask, raw half floats. */
enum { CK_REPL = 3 };
static const char *const ck_repl_names[CK_REPL] = {"step", "mask", "scale.f16"};
static const int ck_repl_dtypes[CK_REPL] = {PLX_I64, PLX_U8, PLX_F16};
static const size_t ck_repl_counts[CK_REPL] = {1, 37, 10};

/* The value of element i of tensor k, as an exact double (f32/f64 units). */
static inline double ck_value(int k, size_t i)
{
    return (double)((i * 37 + (size_t)k * 101) % 1000) / 8.0 - 60.0;
}
static inline double ck_momentum(size_t i)
{
    return -ck_value(0, i) / 4.0;
}

/* Fill element i of a buffer of dtype with tensor k's value. */
static inline void ck_store(void *buf, int dtype, size_t j, int k, size_t i)
{
    switch (dtype) {
    case PLX_F32: ((float *)buf)[j] = (float)ck_value(k, i); break;
    case PLX_F64: ((double *)buf)[j] = ck_value(k, i); break;
    case PLX_I64: ((int64_t *)buf)[j] = 1000003 * (int64_t)k + (int64_t)i + 1; break;
    case PLX_U8: ((uint8_t *)buf)[j] = (uint8_t)((i * 7 + (size_t)k) & 255); break;
    case PLX_F16: ((uint16_t *)buf)[j] = (uint16_t)((i * 131 + (size_t)k) & 0x3bff); break;
    default: break;
    }
}

/* Replicated tensors are numbered after the units: k = CK_UNITS + r. */
static inline void ck_fill(void *buf, int dtype, int k, size_t first, size_t n)
{
    for (size_t j = 0; j < n; j++)
        ck_store(buf, dtype, j, k, first + j);
}

/* 1 if buf (n elements of tensor k from first) holds exactly the values. */
static inline int ck_equal(const void *buf, int dtype, int k, size_t first, size_t n)
{
    size_t es = plx_dtype_size(dtype);
    unsigned char want[8];
    for (size_t j = 0; j < n; j++) {
        ck_store(want, dtype, 0, k, first + j);
        if (memcmp((const char *)buf + j * es, want, es))
            return 0;
    }
    return 1;
}

#endif
