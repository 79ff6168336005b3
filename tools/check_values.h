/* check_values.h - inputs every dtype holds exactly, and the serial
 * reference of each reduction over them; shared by plexus-bench --check and
 * the collective tests. Sums stay below 100, products at 2, so integer,
 * f16 and bf16 results are exact and can be compared with ==; bitwise
 * inputs are below 64. */
#ifndef PLEXUS_CHECK_VALUES_H
#define PLEXUS_CHECK_VALUES_H

#include <stdint.h>
#include <string.h>

#include "plexus/plexus.h"

static inline uint16_t f16_from(double d)
{
    /* d is a small integer or half-integer here, so no rounding is needed. */
    if (d == 0)
        return 0;
    uint16_t sign = d < 0 ? 0x8000 : 0;
    if (d < 0)
        d = -d;
    int e = 0;
    while (d >= 2) {
        d /= 2;
        e++;
    }
    while (d < 1) {
        d *= 2;
        e--;
    }
    return (uint16_t)(sign | (uint16_t)((e + 15) << 10) | (uint16_t)((d - 1) * 1024));
}

static inline double f16_to(uint16_t h)
{
    int e = (h >> 10) & 0x1f, m = h & 0x3ff;
    double v = e ? 1 + m / 1024.0 : m / 1024.0;
    int ex = e ? e - 15 : -14;
    for (; ex > 0; ex--)
        v *= 2;
    for (; ex < 0; ex++)
        v /= 2;
    return h & 0x8000 ? -v : v;
}

static inline void put(void *buf, size_t i, int dt, double v)
{
    switch (dt) {
    case PLX_I8: ((int8_t *)buf)[i] = (int8_t)v; break;
    case PLX_U8: ((uint8_t *)buf)[i] = (uint8_t)v; break;
    case PLX_I32: ((int32_t *)buf)[i] = (int32_t)v; break;
    case PLX_U32: ((uint32_t *)buf)[i] = (uint32_t)v; break;
    case PLX_I64: ((int64_t *)buf)[i] = (int64_t)v; break;
    case PLX_U64: ((uint64_t *)buf)[i] = (uint64_t)v; break;
    case PLX_F16: ((uint16_t *)buf)[i] = f16_from(v); break;
    case PLX_BF16: {
        float f = (float)v;
        uint32_t x;
        memcpy(&x, &f, 4);
        ((uint16_t *)buf)[i] = (uint16_t)(x >> 16); /* exact values: truncation is exact */
        break;
    }
    case PLX_F32: ((float *)buf)[i] = (float)v; break;
    default: ((double *)buf)[i] = v; break;
    }
}

static inline double get(const void *buf, size_t i, int dt)
{
    switch (dt) {
    case PLX_I8: return ((const int8_t *)buf)[i];
    case PLX_U8: return ((const uint8_t *)buf)[i];
    case PLX_I32: return ((const int32_t *)buf)[i];
    case PLX_U32: return ((const uint32_t *)buf)[i];
    case PLX_I64: return (double)((const int64_t *)buf)[i];
    case PLX_U64: return (double)((const uint64_t *)buf)[i];
    case PLX_F16: return f16_to(((const uint16_t *)buf)[i]);
    case PLX_BF16: {
        uint32_t x = (uint32_t)((const uint16_t *)buf)[i] << 16;
        float f;
        memcpy(&f, &x, 4);
        return f;
    }
    case PLX_F32: return ((const float *)buf)[i];
    default: return ((const double *)buf)[i];
    }
}

/* Bitwise inputs (integer types only): below 64, so i8 holds them too;
 * AND clears one bit a rank, OR sets one. Tables, not shifts: gcc 12 at -O2
 * took minutes over the shifts inlined into the check loops. */
static inline double bitwise_val(int r, size_t i, int op)
{
    static const unsigned char clear[8] = {62, 61, 59, 55, 47, 31, 63, 63}, set[6] = {1, 2, 4, 8, 16, 32};
    size_t k = i + (size_t)r;
    return op == PLX_BAND ? clear[k % 8] : op == PLX_BOR ? set[k % 6] : (double)((i * 7 + (size_t)r * 13) % 64);
}

/* Input of rank r at global index i: products stay 2, sums stay below 100. */
static inline double val(int r, size_t i, int op, int P)
{
    if (op == PLX_AVG) /* rank-dependent, yet the sum is P * (i % 5 + 1): an exact average */
        return (double)(i % 5 + 1) + (r == 0 ? P - 1 : -1);
    if (op == PLX_PROD)
        return (int)((i + (size_t)r) % (size_t)P) == 0 ? 2 : 1;
    if (op == PLX_MIN || op == PLX_MAX)
        return (double)((i + 3 * (size_t)r) % 7);
    if (op >= PLX_BAND)
        return bitwise_val(r, i, op);
    return (double)(i % 5 + (size_t)(r % 4));
}

/* The bitwise reference, in integers from the start. */
static inline double bitwise_ref(size_t i, int op, int P)
{
    unsigned acc = op == PLX_BAND ? 63u : 0u;
    for (int r = 0; r < P; r++) {
        unsigned v = (unsigned)val(r, i, op, P);
        acc = op == PLX_BAND ? acc & v : op == PLX_BOR ? acc | v : acc ^ v;
    }
    return acc;
}

static inline double reduce_ref(size_t i, int op, int dt, int P)
{
    if (op >= PLX_BAND)
        return bitwise_ref(i, op, P);
    double acc = val(0, i, op, P);
    for (int r = 1; r < P; r++) {
        double v = val(r, i, op, P);
        acc = op == PLX_PROD ? acc * v : op == PLX_MIN ? (v < acc ? v : acc) : op == PLX_MAX ? (v > acc ? v : acc) : acc + v;
    }
    (void)dt;
    return op == PLX_AVG ? acc / P : acc;
}

#endif
