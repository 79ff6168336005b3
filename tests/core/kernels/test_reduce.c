/* test_reduce.c - the reduction kernels (core/reduce.c) against scalar
 * references written independently here: every dtype x op, lengths around
 * the vector and f16/bf16 block boundaries, unaligned starts, out aliasing a
 * or b, NaN/inf operands; scale_div; f16/bf16 conversions exhaustively
 * against an ldexp/nearbyint model (inf, NaN, subnormals, rounding ties);
 * invalid dtype/op/divisor.
 *
 * Comparisons are exact (bitwise; any NaN matches any NaN): each element is
 * one IEEE operation in the kernel and in the reference, so there is no
 * rounding freedom. f16/bf16 results are defined as round-to-nearest-even of
 * the f32 result of the widened operands, and the reference computes that. */
#include <fenv.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plexus/plexus.h"
#include "reduce.h"
#include "check.h"

static int failures;

static uint64_t rng = 0x9e3779b97f4a7c15u;
static uint64_t next_u64(void)
{ /* xorshift64*: deterministic, so a failure reproduces */
    rng ^= rng >> 12;
    rng ^= rng << 25;
    rng ^= rng >> 27;
    return rng * 0x2545f4914f6cdd1dULL;
}

/* ---- reference conversions ------------------------------------------------
 * A binary16-like format with mb mantissa bits and exponent bias `bias`
 * (f16: 10, 15; bf16: 7, 127), written with ldexp/frexp/nearbyint so it
 * shares no code or method with the bit-twiddling in reduce.c. */

static float ref_widen(uint16_t h, int mb, int eb)
{
    int bias = (1 << (eb - 1)) - 1, emax = (1 << eb) - 1;
    int sign = h >> 15, e = (h >> mb) & emax, m = h & ((1 << mb) - 1);
    double v;
    if (e == emax)
        v = m ? NAN : INFINITY;
    else if (e == 0)
        v = ldexp(m, 1 - bias - mb);
    else
        v = ldexp(m + (1 << mb), e - bias - mb);
    return (float)(sign ? -v : v);
}

static uint16_t ref_narrow(float f, int mb, int eb)
{
    int bias = (1 << (eb - 1)) - 1, emax = (1 << eb) - 1;
    uint16_t sign = signbit(f) ? 0x8000 : 0;
    if (isnan(f))
        return (uint16_t)(sign | (emax << mb) | (1 << (mb - 1)));
    double a = fabs((double)f);
    if (isinf(f))
        return (uint16_t)(sign | (emax << mb));
    if (a == 0)
        return sign;
    int e2;
    frexp(a, &e2);
    int E = e2 - 1; /* a in [2^E, 2^(E+1)) */
    if (E < 1 - bias)
        E = 1 - bias; /* subnormal range shares the smallest quantum */
    double q = nearbyint(ldexp(a, mb - E)); /* exact scaling; ties to even */
    if (q >= ldexp(1, mb + 1)) { /* rounded up into the next binade */
        E++;
        q = ldexp(1, mb);
    }
    if (E + bias >= emax)
        return (uint16_t)(sign | (emax << mb));
    if (q < ldexp(1, mb)) /* subnormal (or zero) */
        return (uint16_t)(sign | (uint16_t)q);
    return (uint16_t)(sign | ((E + bias) << mb) | ((uint16_t)q - (1 << mb)));
}

static float f16w(uint16_t h) { return ref_widen(h, 10, 5); }
static float bf16w(uint16_t h) { return ref_widen(h, 7, 8); }
static uint16_t f16n(float f) { return ref_narrow(f, 10, 5); }
static uint16_t bf16n(float f) { return ref_narrow(f, 7, 8); }

static int same_f32(float x, float y)
{
    return (isnan(x) && isnan(y)) || memcmp(&x, &y, sizeof x) == 0;
}

static int half_is_nan(uint16_t h, int mb)
{
    int emax = mb == 10 ? 0x1f : 0xff;
    return ((h >> mb) & emax) == emax && (h & ((1 << mb) - 1));
}

static int same_half(uint16_t x, uint16_t y, int mb)
{
    return (half_is_nan(x, mb) && half_is_nan(y, mb)) || x == y;
}

static float bits_f32(uint32_t x)
{
    float f;
    memcpy(&f, &x, sizeof f);
    return f;
}

static void test_conversions(void)
{
    /* widening: all 65536 patterns of both formats */
    for (uint32_t h = 0; h < 0x10000; h++) {
        CHECKF(same_f32(plx__f16_to_f32((uint16_t)h), f16w((uint16_t)h)), "f16_to_f32(0x%04x) = %a, want %a", h,
              plx__f16_to_f32((uint16_t)h), f16w((uint16_t)h));
        CHECKF(same_f32(plx__bf16_to_f32((uint16_t)h), bf16w((uint16_t)h)), "bf16_to_f32(0x%04x)", h);
        /* round trip of every non-NaN value is the identity */
        if (!half_is_nan((uint16_t)h, 10))
            CHECKF(plx__f32_to_f16(plx__f16_to_f32((uint16_t)h)) == h, "f16 round trip 0x%04x", h);
        if (!half_is_nan((uint16_t)h, 7))
            CHECKF(plx__f32_to_bf16(plx__bf16_to_f32((uint16_t)h)) == h, "bf16 round trip 0x%04x", h);
    }
    /* narrowing: every midpoint between adjacent values (the ties) and the
     * floats right beside it, for both formats */
    for (uint32_t h = 0; h < 0x7fff; h++) {
        for (int fmt = 0; fmt < 2; fmt++) {
            int mb = fmt ? 7 : 10;
            float lo = fmt ? bf16w((uint16_t)h) : f16w((uint16_t)h);
            float hi = fmt ? bf16w((uint16_t)(h + 1)) : f16w((uint16_t)(h + 1));
            if (isnan(lo) || isnan(hi) || isinf(lo))
                continue;
            /* above the largest finite value, the tie is with 2^(emax+1) */
            double hid = isinf(hi) ? (fmt ? ldexp(1, 128) : 65536.0) : (double)hi;
            double mid = ((double)lo + hid) / 2;
            float cases[3] = {(float)mid, nextafterf((float)mid, -INFINITY), nextafterf((float)mid, INFINITY)};
            if ((double)(float)mid != mid) /* bf16 near the top: mid not a float, no exact tie */
                cases[0] = cases[1];
            for (int k = 0; k < 3; k++) {
                for (int s = 0; s < 2; s++) {
                    float v = s ? -cases[k] : cases[k];
                    uint16_t got = fmt ? plx__f32_to_bf16(v) : plx__f32_to_f16(v);
                    uint16_t want = fmt ? bf16n(v) : f16n(v);
                    CHECKF(same_half(got, want, mb), "%s(%a) = 0x%04x, want 0x%04x", fmt ? "f32_to_bf16" : "f32_to_f16",
                          (double)v, got, want);
                }
            }
        }
    }
    /* random f32 bit patterns, NaNs and f32 subnormals included */
    for (int i = 0; i < 2000000; i++) {
        float v = bits_f32((uint32_t)next_u64());
        CHECKF(same_half(plx__f32_to_f16(v), f16n(v), 10), "f32_to_f16(%a) = 0x%04x, want 0x%04x", (double)v,
              plx__f32_to_f16(v), f16n(v));
        CHECKF(same_half(plx__f32_to_bf16(v), bf16n(v), 7), "f32_to_bf16(%a) = 0x%04x, want 0x%04x", (double)v,
              plx__f32_to_bf16(v), bf16n(v));
    }
    /* named edge cases, so a failure reads plainly */
    struct { float in; uint16_t f16, bf16; } e[] = {
        {1.0f, 0x3c00, 0x3f80},
        {-0.0f, 0x8000, 0x8000},
        {INFINITY, 0x7c00, 0x7f80},
        {-INFINITY, 0xfc00, 0xff80},
        {65504.0f, 0x7bff, 0x4780},
        {65519.0f, 0x7bff, 0x4780},         /* below the f16 midpoint to inf */
        {65520.0f, 0x7c00, 0x4780},         /* f16 tie with odd 0x7bff: to even = inf */
        {0x1p-24f, 0x0001, 0x3380},         /* smallest f16 subnormal */
        {0x1p-25f, 0x0000, 0x3300},         /* tie between 0 and 2^-24: even is 0 */
        {0x1.000002p-25f, 0x0001, 0x3300},  /* just above the tie */
        {0x3p-25f, 0x0002, 0x33c0},         /* tie between 1 and 2 (x2^-24): even is 2 */
        {0x1.ff8p-15f, 0x03ff, 0x3880},     /* largest f16 subnormal */
        {0x1.ffcp-15f, 0x0400, 0x3880},     /* tie between it and the smallest normal */
        {bits_f32(0x3f808000), 0x3c04, 0x3f80}, /* bf16 tie, even low bit: stays */
        {bits_f32(0x3f818000), 0x3c0c, 0x3f82}, /* bf16 tie, odd low bit: up */
        {bits_f32(0x7f7fffff), 0x7c00, 0x7f80}, /* FLT_MAX rounds to inf in both */
        {bits_f32(0x00000001), 0x0000, 0x0000}, /* f32 subnormal */
        {bits_f32(0x00008000), 0x0000, 0x0000}, /* bf16 tie at the bottom: to 0 */
        {bits_f32(0x00018000), 0x0000, 0x0002},
    };
    for (size_t i = 0; i < sizeof e / sizeof e[0]; i++) {
        CHECKF(plx__f32_to_f16(e[i].in) == e[i].f16, "f32_to_f16(%a) = 0x%04x, want 0x%04x", (double)e[i].in,
              plx__f32_to_f16(e[i].in), e[i].f16);
        CHECKF(plx__f32_to_bf16(e[i].in) == e[i].bf16, "f32_to_bf16(%a) = 0x%04x, want 0x%04x", (double)e[i].in,
              plx__f32_to_bf16(e[i].in), e[i].bf16);
    }
    /* NaN stays NaN (a signalling NaN whose payload sits in the dropped bits
     * must not turn into inf), with its sign */
    float snan = bits_f32(0x7f800001), nneg = bits_f32(0xffc00000);
    CHECKF(half_is_nan(plx__f32_to_bf16(snan), 7), "bf16(sNaN) = 0x%04x", plx__f32_to_bf16(snan));
    CHECKF(half_is_nan(plx__f32_to_f16(snan), 10), "f16(sNaN) = 0x%04x", plx__f32_to_f16(snan));
    CHECKF(plx__f32_to_bf16(nneg) >> 15 && half_is_nan(plx__f32_to_bf16(nneg), 7), "bf16(-NaN)");
    CHECKF(plx__f32_to_f16(nneg) >> 15 && half_is_nan(plx__f32_to_f16(nneg), 10), "f16(-NaN)");
    CHECKF(isnan(plx__f16_to_f32(0x7e00)) && isnan(plx__bf16_to_f32(0x7fc0)), "half NaN widens to NaN");
}

/* The whole-buffer conversions (AVG's f32 copies, FSDP's mixed precision)
 * take the conversion instructions where the CPU has them, 8 at a time, and
 * the scalar code for the tail: every element of both must match the
 * reference, at every offset of the 8-wide blocks. */
static void test_buffer_conversions(void)
{
    enum { N = 0x10000 + 7 };
    uint16_t *h = malloc(N * sizeof *h), *back = malloc(N * sizeof *back);
    float *f = malloc(N * sizeof *f), *v = malloc(N * sizeof *v);
    for (size_t i = 0; i < N; i++)
        h[i] = (uint16_t)i;
    for (int fmt = 0; fmt < 2; fmt++) {
        int dt = fmt ? PLX_BF16 : PLX_F16, mb = fmt ? 7 : 10;
        for (uint64_t d = 1; d <= 3; d++) {
            CHECK(plx__widen_div(f, h + 1, N - 1, dt, d) == 0);
            long bad = 0;
            for (size_t i = 0; i < N - 1; i++) {
                float want = (fmt ? bf16w(h[i + 1]) : f16w(h[i + 1])) / (float)d;
                if (!same_f32(f[i], want) && bad++ < 5)
                    CHECKF(0, "widen_div(%s, /%d)[%zu] of 0x%04x = %a, want %a", fmt ? "bf16" : "f16", (int)d, i,
                           h[i + 1], (double)f[i], (double)want);
            }
            CHECKF(bad == 0, "widen_div(%s, /%d): %ld wrong", fmt ? "bf16" : "f16", (int)d, bad);
        }
        /* narrowing: random f32 patterns (NaNs, subnormals, ties are rare:
         * test_conversions covers those through the same scalar code) and
         * every half value widened and narrowed back */
        for (size_t i = 0; i < N; i++)
            v[i] = i & 1 ? bits_f32((uint32_t)next_u64()) : (fmt ? bf16w((uint16_t)(i * 977)) : f16w((uint16_t)(i * 977)));
        CHECK(plx__narrow(back, v + 3, N - 3, dt) == 0);
        long bad = 0;
        for (size_t i = 0; i < N - 3; i++) {
            uint16_t want = fmt ? bf16n(v[i + 3]) : f16n(v[i + 3]);
            if (!same_half(back[i], want, mb) && bad++ < 5)
                CHECKF(0, "narrow(%s)[%zu] of %a = 0x%04x, want 0x%04x", fmt ? "bf16" : "f16", i, (double)v[i + 3],
                       back[i], want);
        }
        CHECKF(bad == 0, "narrow(%s): %ld wrong", fmt ? "bf16" : "f16", bad);
    }
    CHECK(plx__widen_div(f, h, 1, PLX_F32, 1) == PLX_ERR_INVALID_ARG);
    CHECK(plx__narrow(back, f, 1, PLX_I8) == PLX_ERR_INVALID_ARG);
    free(h);
    free(back);
    free(f);
    free(v);
}

/* ---- kernels --------------------------------------------------------------- */

/* Reference result of one element, by dtype. Integer sum/prod wrap (done in
 * the unsigned type); float min/max propagate NaN. */
#define REF_INT(T, U, x, y, op)                                                \
    ((op) == PLX_SUM || (op) == PLX_AVG ? (T)((U)(x) + (U)(y))                 \
     : (op) == PLX_PROD                 ? (T)((U)(x) * (U)(y))                 \
     : (op) == PLX_MIN                  ? ((x) < (y) ? (x) : (y))              \
     : (op) == PLX_MAX                  ? ((x) > (y) ? (x) : (y))              \
     : (op) == PLX_BAND                 ? (T)((x) & (y))                       \
     : (op) == PLX_BOR                  ? (T)((x) | (y))                       \
                                        : (T)((x) ^ (y)))

static int is_float(int dt)
{
    return dt == PLX_F16 || dt == PLX_BF16 || dt == PLX_F32 || dt == PLX_F64;
}

static int is_bitwise(int op)
{
    return op == PLX_BAND || op == PLX_BOR || op == PLX_BXOR;
}

static double ref_float(double x, double y, int op)
{
    switch (op) {
    case PLX_SUM:
    case PLX_AVG: return x + y;
    case PLX_PROD: return x * y;
    case PLX_MIN: return isnan(x) || isnan(y) ? NAN : x < y ? x : y;
    default: return isnan(x) || isnan(y) ? NAN : x > y ? x : y;
    }
}

static float ref_f32(float x, float y, int op)
{
    switch (op) { /* in float: double would round differently */
    case PLX_SUM:
    case PLX_AVG: return x + y;
    case PLX_PROD: return x * y;
    default: return (float)ref_float(x, y, op);
    }
}

static void fill_random(void *buf, size_t bytes, int dtype)
{
    unsigned char *p = buf;
    for (size_t i = 0; i < bytes; i++)
        p[i] = (unsigned char)next_u64();
    size_t n = bytes / plx_dtype_size(dtype);
    /* floats: ordinary values, plus a sprinkle of NaN, +-inf and zeros */
    for (size_t i = 0; i < n; i++) {
        uint64_t r = next_u64();
        double v = ((double)(r >> 11) / 9007199254740992.0 - 0.5) * 200.0;
        int special = (r & 31) == 0 ? (int)((r >> 5) & 3) + 1 : 0;
        if (special == 1) v = NAN;
        if (special == 2) v = INFINITY;
        if (special == 3) v = -INFINITY;
        if (special == 4) v = 0.0;
        switch (dtype) {
        case PLX_F32: ((float *)buf)[i] = (float)v; break;
        case PLX_F64: ((double *)buf)[i] = v; break;
        case PLX_F16: ((uint16_t *)buf)[i] = f16n((float)v); break;
        case PLX_BF16: ((uint16_t *)buf)[i] = bf16n((float)v); break;
        default: break;
        }
    }
}

/* Compare got[i] with the reference of a[i] op b[i]; 1 if all match. */
static int check_elems(const void *got, const void *a, const void *b, size_t n, int dt, int op)
{
    for (size_t i = 0; i < n; i++) {
        int ok;
        switch (dt) {
#define INT_CASE(D, T, U)                                                      \
    case D: {                                                                  \
        T x = ((const T *)a)[i], y = ((const T *)b)[i];                        \
        ok = ((const T *)got)[i] == (T)REF_INT(T, U, x, y, op);                \
        break;                                                                 \
    }
            INT_CASE(PLX_I8, int8_t, uint8_t)
            INT_CASE(PLX_U8, uint8_t, uint8_t)
            INT_CASE(PLX_I32, int32_t, uint32_t)
            INT_CASE(PLX_U32, uint32_t, uint32_t)
            INT_CASE(PLX_I64, int64_t, uint64_t)
            INT_CASE(PLX_U64, uint64_t, uint64_t)
        case PLX_F32:
            ok = same_f32(((const float *)got)[i], ref_f32(((const float *)a)[i], ((const float *)b)[i], op));
            break;
        case PLX_F64: {
            double g = ((const double *)got)[i], w = ref_float(((const double *)a)[i], ((const double *)b)[i], op);
            ok = (isnan(g) && isnan(w)) || memcmp(&g, &w, sizeof g) == 0;
            break;
        }
        default: {
            int f16 = dt == PLX_F16;
            uint16_t x = ((const uint16_t *)a)[i], y = ((const uint16_t *)b)[i];
            float r = ref_f32(f16 ? f16w(x) : bf16w(x), f16 ? f16w(y) : bf16w(y), op);
            ok = same_half(((const uint16_t *)got)[i], f16 ? f16n(r) : bf16n(r), f16 ? 10 : 7);
            break;
        }
        }
        if (!ok) {
            CHECKF(0, "dtype %d op %d n %zu: element %zu wrong", dt, op, n, i);
            return 0;
        }
    }
    return 1;
}

/* A bitwise op on a float type: refused, naming both, nothing written. */
static void refused(unsigned char *po, const void *pa, const void *pb, size_t n, int dt, int op)
{
    CHECKF(plx__reduce3(po, pa, pb, n, dt, op) == PLX_ERR_INVALID_ARG, "%s on %s not refused", plx_redop_name(op),
           plx_dtype_name(dt));
    CHECKF(strstr(plx_last_error(), plx_redop_name(op)) && strstr(plx_last_error(), plx_dtype_name(dt)),
           "refusal names neither op nor dtype: %s", plx_last_error());
    for (size_t k = 0; k < n * plx_dtype_size(dt) + 16; k++)
        CHECKF(po[k] == 0xa5, "refused %s on %s wrote byte %zu", plx_redop_name(op), plx_dtype_name(dt), k);
}

static void test_kernels(void)
{
    /* lengths around vector widths and the 512-element f16 block */
    static const size_t lens[] = {0, 1, 2, 3, 7, 8, 15, 16, 17, 31, 33, 63, 64, 65, 511, 512, 513, 1023, 1025, 4099};
    enum { MAXN = 4099 + 1, MAXB = MAXN * 8 };
    unsigned char *a = malloc(MAXB), *b = malloc(MAXB), *out = malloc(MAXB + 16), *keep = malloc(MAXB);
    for (int dt = 0; dt < PLX_DTYPE_COUNT; dt++) {
        size_t es = plx_dtype_size(dt);
        for (int op = 0; op < PLX_REDOP_COUNT; op++) {
            for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
                size_t n = lens[li];
                for (int shift = 0; shift < 2; shift++) { /* unaligned start: one element in */
                    unsigned char *pa = a + shift * es, *pb = b + shift * es, *po = out + shift * es;
                    fill_random(a, MAXB, dt);
                    fill_random(b, MAXB, dt);
                    memset(out, 0xa5, MAXB + 16);
                    if (is_float(dt) && is_bitwise(op)) {
                        refused(po, pa, pb, n, dt, op);
                        continue;
                    }
                    /* three-operand form; bytes after the output stay untouched */
                    CHECKF(plx__reduce3(po, pa, pb, n, dt, op) == 0, "reduce3 dt %d op %d", dt, op);
                    check_elems(po, pa, pb, n, dt, op);
                    for (size_t k = n * es; k < n * es + 16; k++)
                        CHECKF(po[k] == 0xa5, "reduce3 dt %d op %d n %zu wrote past the end", dt, op, n);
                    /* out == a (the in-place form), then out == b */
                    memcpy(keep, pa, n * es);
                    CHECKF(plx__reduce(pa, pb, n, dt, op) == 0, "reduce");
                    check_elems(pa, keep, pb, n, dt, op);
                    memcpy(keep, pb, n * es);
                    CHECKF(plx__reduce3(pb, pa, pb, n, dt, op) == 0, "reduce3 out=b");
                    check_elems(pb, pa, keep, n, dt, op);
                }
            }
        }
    }
    free(a);
    free(b);
    free(out);
    free(keep);
}

/* Every f16/bf16 pattern through the kernels (which may convert with other
 * code than the scalar functions, e.g. F16C): each value against partners
 * chosen to hit subnormal results, ties, overflow, NaN and inf. */
static void test_half_kernels_exhaustive(void)
{
    enum { N = 65536 };
    static uint16_t a[N], b[N], o[N];
    static const uint16_t partner_seed[] = {0x0000, 0x8000, 0x0001, 0x8001, 0x03ff, 0x0400, 0x3c00, 0xbc00,
                                            0x3800, 0x1400, 0x7bff, 0xfbff, 0x7c00, 0xfc00, 0x7e00, 0x0155};
    for (int fmt = 0; fmt < 2; fmt++) {
        int dt = fmt ? PLX_BF16 : PLX_F16;
        for (size_t ps = 0; ps < sizeof partner_seed / sizeof partner_seed[0] + 2; ps++) {
            for (uint32_t i = 0; i < N; i++) {
                a[i] = (uint16_t)i;
                /* fixed partners (bf16: the same bits mean other values, fine),
                 * then neighbours and a scrambled pattern */
                b[i] = ps < 16 ? partner_seed[ps] : ps == 16 ? (uint16_t)(i ^ 1) : (uint16_t)(i * 40503u);
            }
            for (int op = 0; op < PLX_AVG + 1; op++) { /* the bitwise ops: refused, test_kernels */
                CHECKF(plx__reduce3(o, a, b, N, dt, op) == 0, "reduce3");
                check_elems(o, a, b, N, dt, op);
            }
        }
        /* the in-place form with scale_div, too */
        for (uint32_t i = 0; i < N; i++)
            a[i] = o[i] = (uint16_t)i;
        plx__scale_div(o, N, dt, 3);
        for (uint32_t i = 0; i < N; i++) {
            float w = (fmt ? bf16w(a[i]) : f16w(a[i])) / 3.0f;
            CHECKF(same_half(o[i], fmt ? bf16n(w) : f16n(w), fmt ? 7 : 10), "scale_div %s 0x%04x", fmt ? "bf16" : "f16",
                  a[i]);
        }
    }
}

/* NaN handling, spelled out: min/max propagate NaN from either side, as
 * torch does; inf - inf is NaN. */
static void test_nan_rules(void)
{
    float a[4] = {NAN, 1.0f, INFINITY, 2.0f}, b[4] = {1.0f, NAN, -INFINITY, -0.5f}, o[4];
    plx__reduce3(o, a, b, 4, PLX_F32, PLX_MIN);
    CHECKF(isnan(o[0]) && isnan(o[1]) && o[2] == -INFINITY && o[3] == -0.5f, "f32 min NaN rules");
    plx__reduce3(o, a, b, 4, PLX_F32, PLX_MAX);
    CHECKF(isnan(o[0]) && isnan(o[1]) && o[2] == INFINITY && o[3] == 2.0f, "f32 max NaN rules");
    plx__reduce3(o, a, b, 4, PLX_F32, PLX_SUM);
    CHECKF(isnan(o[0]) && isnan(o[1]) && isnan(o[2]) && o[3] == 1.5f, "f32 sum NaN rules");
    uint16_t ha[2] = {0x7e00, 0x3c00}, hb[2] = {0x3c00, 0x7e00}, ho[2];
    plx__reduce3(ho, ha, hb, 2, PLX_F16, PLX_MAX);
    CHECKF(half_is_nan(ho[0], 10) && half_is_nan(ho[1], 10), "f16 max NaN rules");
    uint16_t ba[2] = {0x7fc0, 0x3f80}, bb[2] = {0x3f80, 0x7fc0}, bo[2];
    plx__reduce3(bo, ba, bb, 2, PLX_BF16, PLX_MIN);
    CHECKF(half_is_nan(bo[0], 7) && half_is_nan(bo[1], 7), "bf16 min NaN rules");
    /* f16 overflow of a sum saturates to inf, as the rounding says */
    uint16_t big[1] = {0x7bff}, sum[1];
    plx__reduce3(sum, big, big, 1, PLX_F16, PLX_SUM);
    CHECKF(sum[0] == 0x7c00, "f16 65504+65504 = 0x%04x, want inf", sum[0]);
}

static void test_scale_div(void)
{
    int8_t i8[4] = {-7, 7, -128, 127};
    plx__scale_div(i8, 4, PLX_I8, 2);
    CHECKF(i8[0] == -3 && i8[1] == 3 && i8[2] == -64 && i8[3] == 63, "i8 /2 truncates toward zero");
    int64_t i64[3] = {-9, INT64_MIN, INT64_MAX};
    plx__scale_div(i64, 3, PLX_I64, 4);
    CHECKF(i64[0] == -2 && i64[1] == INT64_MIN / 4 && i64[2] == INT64_MAX / 4, "i64 /4");
    uint64_t u64[2] = {UINT64_MAX, 5};
    plx__scale_div(u64, 2, PLX_U64, 3);
    CHECKF(u64[0] == UINT64_MAX / 3 && u64[1] == 1, "u64 /3 (no signed conversion)");
    uint8_t u8[2] = {255, 9};
    plx__scale_div(u8, 2, PLX_U8, 4);
    CHECKF(u8[0] == 63 && u8[1] == 2, "u8 /4");
    int32_t i32[2] = {-5, 5};
    uint32_t u32[1] = {4000000000u};
    plx__scale_div(i32, 2, PLX_I32, 3);
    plx__scale_div(u32, 1, PLX_U32, 3);
    CHECKF(i32[0] == -1 && i32[1] == 1 && u32[0] == 1333333333u, "i32/u32 /3");
    /* floats: one correctly rounded division per element */
    enum { N = 1000 };
    float f[N], fk[N];
    double d[N], dk[N];
    uint16_t h[N], hk[N], bh[N], bk[N];
    fill_random(f, sizeof f, PLX_F32);
    fill_random(d, sizeof d, PLX_F64);
    fill_random(h, sizeof h, PLX_F16);
    fill_random(bh, sizeof bh, PLX_BF16);
    memcpy(fk, f, sizeof f);
    memcpy(dk, d, sizeof d);
    memcpy(hk, h, sizeof h);
    memcpy(bk, bh, sizeof bh);
    plx__scale_div(f, N, PLX_F32, 3);
    plx__scale_div(d, N, PLX_F64, 7);
    plx__scale_div(h, N, PLX_F16, 5);
    plx__scale_div(bh, N, PLX_BF16, 6);
    for (int i = 0; i < N; i++) {
        CHECKF(same_f32(f[i], fk[i] / 3.0f), "f32 /3 at %d", i);
        CHECKF((isnan(d[i]) && isnan(dk[i])) || d[i] == dk[i] / 7.0, "f64 /7 at %d", i);
        CHECKF(same_half(h[i], f16n(f16w(hk[i]) / 5.0f), 10), "f16 /5 at %d", i);
        CHECKF(same_half(bh[i], bf16n(bf16w(bk[i]) / 6.0f), 7), "bf16 /6 at %d", i);
    }
    CHECKF(plx__scale_div(f, 0, PLX_F32, 3) == 0, "count 0");
}

static void test_bad_args(void)
{
    float x[1] = {1}, y[1] = {2};
    CHECKF(plx__reduce3(x, x, y, 1, -1, PLX_SUM) == PLX_ERR_INVALID_ARG, "dtype -1");
    CHECKF(strstr(plx_last_error(), "dtype") != NULL, "message names the dtype: '%s'", plx_last_error());
    CHECKF(plx__reduce3(x, x, y, 1, PLX_DTYPE_COUNT, PLX_SUM) == PLX_ERR_INVALID_ARG, "dtype COUNT");
    CHECKF(plx__reduce(x, y, 1, PLX_F32, PLX_REDOP_COUNT) == PLX_ERR_INVALID_ARG, "op COUNT");
    CHECKF(plx__reduce(x, y, 1, PLX_F32, -1) == PLX_ERR_INVALID_ARG, "op -1");
    CHECKF(x[0] == 1.0f, "a rejected call writes nothing");
    CHECKF(plx__scale_div(x, 1, PLX_F32, 0) == PLX_ERR_INVALID_ARG, "divisor 0");
    CHECKF(plx__scale_div(x, 1, 42, 2) == PLX_ERR_INVALID_ARG, "scale dtype 42");
    CHECKF(x[0] == 1.0f, "a rejected scale writes nothing");
    CHECKF(plx__reduce3(NULL, NULL, NULL, 0, PLX_F64, PLX_PROD) == 0, "count 0 with NULL buffers");
}

int main(void)
{
    if (fegetround() != FE_TONEAREST) {
        fprintf(stderr, "rounding mode is not to-nearest; the references assume it\n");
        return 1;
    }
    test_conversions();
    test_buffer_conversions();
    test_kernels();
    test_half_kernels_exhaustive();
    test_nan_rules();
    test_scale_div();
    test_bad_args();
    if (failures) {
        fprintf(stderr, "%d failure(s)\n", failures);
        return 1;
    }
    printf("test_reduce: all checks passed\n");
    return 0;
}
