/* reduce.c - reduction kernels for every dtype x op.
 * Built with -O3 (see core/meson.build) so the plain loops below vectorise;
 * out may alias a or b, so no restrict: gcc versions the loops with a
 * run-time overlap check instead. Integer sum and prod wrap (computed in the
 * unsigned type, so no undefined behaviour). Float min/max propagate NaN,
 * as torch does. f16/bf16 are widened to f32 in blocks and rounded back to
 * nearest-even. */
#include "reduce.h"

#include <string.h>

#include "error.h"
#include "plexus/plexus.h"

/* ---- f16 / bf16 conversions --------------------------------------------- */

float plx__f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ff, x;
    if (exp == 0x1f) {
        x = sign | 0x7f800000u | (mant << 13);
    } else if (exp == 0) {
        if (!mant) {
            x = sign;
        } else { /* subnormal: normalise */
            int e = -1;
            do {
                mant <<= 1;
                e++;
            } while (!(mant & 0x400));
            x = sign | ((uint32_t)(112 - e) << 23) | ((mant & 0x3ff) << 13);
        }
    } else {
        x = sign | ((exp + 112) << 23) | (mant << 13);
    }
    float f;
    memcpy(&f, &x, sizeof f);
    return f;
}

uint16_t plx__f32_to_f16(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    uint32_t sign = (x >> 16) & 0x8000, exp = (x >> 23) & 0xff, mant = x & 0x7fffff;
    if (exp == 0xff) /* inf stays inf, NaN stays a quiet NaN */
        return (uint16_t)(sign | 0x7c00 | (mant ? 0x200 | (mant >> 13) : 0));
    int e = (int)exp - 127 + 15;
    if (e >= 0x1f)
        return (uint16_t)(sign | 0x7c00);
    if (e <= 0) {
        if (e < -10)
            return (uint16_t)sign;
        mant |= 0x800000;
        unsigned shift = (unsigned)(14 - e);
        uint32_t half = mant >> shift, rem = mant & ((1u << shift) - 1), mid = 1u << (shift - 1);
        if (rem > mid || (rem == mid && (half & 1)))
            half++;
        return (uint16_t)(sign | half);
    }
    uint32_t half = ((uint32_t)e << 10) | (mant >> 13), rem = mant & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (half & 1)))
        half++; /* a carry into the exponent is the correct rounding, up to inf */
    return (uint16_t)(sign | half);
}

float plx__bf16_to_f32(uint16_t h)
{
    uint32_t x = (uint32_t)h << 16;
    float f;
    memcpy(&f, &x, sizeof f);
    return f;
}

uint16_t plx__f32_to_bf16(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    if ((x & 0x7fffffff) > 0x7f800000)
        return (uint16_t)((x >> 16) | 0x40);
    return (uint16_t)((x + 0x7fff + ((x >> 16) & 1)) >> 16);
}

/* ---- kernels ------------------------------------------------------------ */

#define ISNAN(x) ((x) != (x))
#define FMIN(x, y) (ISNAN(x) ? (x) : ISNAN(y) ? (y) : (x) < (y) ? (x) : (y))
#define FMAX(x, y) (ISNAN(x) ? (x) : ISNAN(y) ? (y) : (x) > (y) ? (x) : (y))
#define IMIN(x, y) ((x) < (y) ? (x) : (y))
#define IMAX(x, y) ((x) > (y) ? (x) : (y))

/* One function per (type, op): out[i] = a[i] OP b[i]. */
#define KERNEL(T, NAME, EXPR)                                                  \
    static void NAME(void *out_, const void *a_, const void *b_, size_t n)     \
    {                                                                          \
        T *out = out_;                                                         \
        const T *a = a_, *b = b_;                                              \
        for (size_t i = 0; i < n; i++) {                                       \
            T x = a[i], y = b[i];                                              \
            out[i] = (EXPR);                                                   \
        }                                                                      \
    }

/* Integers: sum and prod in the unsigned type U (wrapping, defined). */
#define INT_KERNELS(T, U, P)                                                   \
    KERNEL(T, P##_sum, (T)((U)x + (U)y))                                       \
    KERNEL(T, P##_prod, (T)((U)x * (U)y))                                      \
    KERNEL(T, P##_min, IMIN(x, y))                                             \
    KERNEL(T, P##_max, IMAX(x, y))

#define FLOAT_KERNELS(T, P)                                                    \
    KERNEL(T, P##_sum, x + y)                                                  \
    KERNEL(T, P##_prod, x * y)                                                 \
    KERNEL(T, P##_min, FMIN(x, y))                                             \
    KERNEL(T, P##_max, FMAX(x, y))

INT_KERNELS(int8_t, uint8_t, i8)
INT_KERNELS(uint8_t, uint8_t, u8)
INT_KERNELS(int32_t, uint32_t, i32)
INT_KERNELS(uint32_t, uint32_t, u32)
INT_KERNELS(int64_t, uint64_t, i64)
INT_KERNELS(uint64_t, uint64_t, u64)
FLOAT_KERNELS(float, f32)
FLOAT_KERNELS(double, f64)

typedef void (*kernel_fn)(void *, const void *, const void *, size_t);

#define ROW(P) {P##_sum, P##_prod, P##_min, P##_max, P##_sum}
static const kernel_fn kernels[PLX_DTYPE_COUNT][PLX_REDOP_COUNT] = {
    [PLX_I8] = ROW(i8), [PLX_U8] = ROW(u8), [PLX_I32] = ROW(i32), [PLX_U32] = ROW(u32),
    [PLX_I64] = ROW(i64), [PLX_U64] = ROW(u64), [PLX_F32] = ROW(f32), [PLX_F64] = ROW(f64),
};

/* f16/bf16: widen a block to f32, run the f32 kernel, round back. */
enum { BLOCK = 512 };

static void half_kernel(int dtype, int op, void *out_, const void *a_, const void *b_, size_t n)
{
    float fa[BLOCK], fb[BLOCK];
    uint16_t *out = out_;
    const uint16_t *a = a_, *b = b_;
    float (*widen)(uint16_t) = dtype == PLX_F16 ? plx__f16_to_f32 : plx__bf16_to_f32;
    uint16_t (*narrow)(float) = dtype == PLX_F16 ? plx__f32_to_f16 : plx__f32_to_bf16;
    kernel_fn k = kernels[PLX_F32][op];
    for (size_t base = 0; base < n; base += BLOCK) {
        size_t m = n - base < BLOCK ? n - base : BLOCK;
        for (size_t i = 0; i < m; i++) {
            fa[i] = widen(a[base + i]);
            fb[i] = widen(b[base + i]);
        }
        k(fa, fa, fb, m);
        for (size_t i = 0; i < m; i++)
            out[base + i] = narrow(fa[i]);
    }
}

int plx__reduce3(void *out, const void *a, const void *b, size_t count, int dtype, int op)
{
    if (dtype < 0 || dtype >= PLX_DTYPE_COUNT || op < 0 || op >= PLX_REDOP_COUNT)
        return plx__err(PLX_ERR_INVALID_ARG, "reduce: invalid dtype %d or op %d", dtype, op);
    if (dtype == PLX_F16 || dtype == PLX_BF16)
        half_kernel(dtype, op, out, a, b, count);
    else
        kernels[dtype][op](out, a, b, count);
    return 0;
}

int plx__reduce(void *inout, const void *in, size_t count, int dtype, int op)
{
    return plx__reduce3(inout, inout, in, count, dtype, op);
}

#define DIV_LOOP(T, D)                                                         \
    do {                                                                       \
        T *p = buf;                                                            \
        for (size_t i = 0; i < count; i++)                                     \
            p[i] = (T)(p[i] / (D));                                            \
    } while (0)

int plx__scale_div(void *buf, size_t count, int dtype, uint64_t divisor)
{
    if (divisor == 0)
        return plx__err(PLX_ERR_INVALID_ARG, "scale: division by zero");
    switch (dtype) {
    case PLX_I8: DIV_LOOP(int8_t, (int64_t)divisor); break;
    case PLX_U8: DIV_LOOP(uint8_t, divisor); break;
    case PLX_I32: DIV_LOOP(int32_t, (int64_t)divisor); break;
    case PLX_U32: DIV_LOOP(uint32_t, divisor); break;
    case PLX_I64: DIV_LOOP(int64_t, (int64_t)divisor); break;
    case PLX_U64: DIV_LOOP(uint64_t, divisor); break;
    case PLX_F32: DIV_LOOP(float, (float)divisor); break;
    case PLX_F64: DIV_LOOP(double, (double)divisor); break;
    case PLX_F16:
    case PLX_BF16: {
        uint16_t *p = buf;
        int f16 = dtype == PLX_F16;
        for (size_t i = 0; i < count; i++) {
            float v = (f16 ? plx__f16_to_f32(p[i]) : plx__bf16_to_f32(p[i])) / (float)divisor;
            p[i] = f16 ? plx__f32_to_f16(v) : plx__f32_to_bf16(v);
        }
        break;
    }
    default:
        return plx__err(PLX_ERR_INVALID_ARG, "scale: invalid dtype %d", dtype);
    }
    return 0;
}
