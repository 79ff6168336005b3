/* reduce.c - reduction kernels for every dtype x op.
 * Built with -O3 (see core/meson.build) so the plain loops below vectorise;
 * out may alias a or b, so no restrict: gcc versions the loops with a
 * run-time overlap check instead. Integer sum and prod wrap (computed in the
 * unsigned type, so no undefined behaviour); band, bor and bxor exist for
 * integers only. Float min/max propagate NaN, as torch does. f16/bf16 are
 * widened to f32 in blocks and rounded back to nearest-even, with
 * branch-free conversions so those loops vectorise too. */
#include "reduce.h"

#include <string.h>

#include "error.h"
#include "plexus/plexus.h"

/* ---- f16 / bf16 conversions --------------------------------------------- */
/* Branch-free (every path computed, then selected) so the block loops of the
 * half kernels vectorise; the exported functions use the same code, so the
 * exhaustive conversion tests cover what the kernels run. Needs the default
 * round-to-nearest mode and no -ffast-math (the subnormal paths round in a
 * float addition). */

static inline uint32_t f2u(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline float u2f(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* c ? x : y for c in {0, 1}, as masks: gcc if-converts nested ?: poorly. */
static inline uint32_t sel(uint32_t c, uint32_t x, uint32_t y)
{
    uint32_t m = 0u - c;
    return (x & m) | (y & ~m);
}

static inline float h2f(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, o = (uint32_t)(h & 0x7fff) << 13, exp = o & 0x0f800000u;
    o += (uint32_t)(127 - 15) << 23;                     /* rebias */
    uint32_t inf_nan = o + ((uint32_t)(128 - 16) << 23); /* exponent all ones, payload kept */
    float sub = u2f(o + (1u << 23)) - u2f(113u << 23);   /* m * 2^-24, exact */
    uint32_t r = sel(exp == 0x0f800000u, inf_nan, sel(exp == 0, f2u(sub), o));
    return u2f(r | sign);
}

static inline uint16_t f2h(float f)
{
    uint32_t x = f2u(f), sign = x & 0x80000000u, a = x ^ sign;
    uint32_t big = sel(a > 0x7f800000u, 0x7e00u, 0x7c00u); /* NaN stays a quiet NaN, else inf */
    /* below 2^-14: adding 0.5 rounds to the 2^-24 grid (nearest even) */
    uint32_t small = f2u(u2f(a) + 0.5f) - (126u << 23);
    /* normal: rebias and round the 13 dropped bits to nearest even; a carry
     * into the exponent is the correct rounding, up to inf */
    uint32_t norm = (a + ((uint32_t)(15 - 127) << 23) + 0xfffu + ((a >> 13) & 1)) >> 13;
    uint32_t r = sel(a >= 0x47800000u, big, sel(a < 0x38800000u, small, norm));
    return (uint16_t)(r | (sign >> 16));
}

static inline float bf2f(uint16_t h)
{
    return u2f((uint32_t)h << 16);
}

static inline uint16_t f2bf(float f)
{
    uint32_t x = f2u(f);
    uint32_t rounded = (x + 0x7fffu + ((x >> 16) & 1)) >> 16, quiet = (x >> 16) | 0x40;
    return (uint16_t)sel((x & 0x7fffffffu) > 0x7f800000u, quiet, rounded);
}

float plx__f16_to_f32(uint16_t h)
{
    return h2f(h);
}

uint16_t plx__f32_to_f16(float f)
{
    return f2h(f);
}

float plx__bf16_to_f32(uint16_t h)
{
    return bf2f(h);
}

uint16_t plx__f32_to_bf16(float f)
{
    return f2bf(f);
}

/* ---- kernels ------------------------------------------------------------ */

#define ISNAN(x) ((x) != (x))
#define FMIN(x, y) (ISNAN(x) ? (x) : ISNAN(y) ? (y) : (x) < (y) ? (x) : (y))
#define FMAX(x, y) (ISNAN(x) ? (x) : ISNAN(y) ? (y) : (x) > (y) ? (x) : (y))
#define IMIN(x, y) ((x) < (y) ? (x) : (y))
#define IMAX(x, y) ((x) > (y) ? (x) : (y))

/* One function per (type, op): out[i] = a[i] OP b[i]. ATTR and the name
 * prefix let the same loops be built twice: for the baseline ISA and, on
 * x86-64, for AVX2 (picked at run time: 256-bit lanes do twice the work of
 * the baseline's 128-bit ones per instruction, which pays once the data is in
 * cache; `plexus-bench --backend sim --coll allreduce` shows it).
 * Elementwise, so both builds give the same bits. */
#define KERNEL(ATTR, T, NAME, EXPR)                                            \
    ATTR static void NAME(void *out_, const void *a_, const void *b_, size_t n) \
    {                                                                          \
        T *out = out_;                                                         \
        const T *a = a_, *b = b_;                                              \
        for (size_t i = 0; i < n; i++) {                                       \
            T x = a[i], y = b[i];                                              \
            out[i] = (EXPR);                                                   \
        }                                                                      \
    }

/* Integers: sum and prod in the unsigned type U (wrapping, defined). */
#define INT_KERNELS(ATTR, T, U, P)                                             \
    KERNEL(ATTR, T, P##_sum, (T)((U)x + (U)y))                                 \
    KERNEL(ATTR, T, P##_prod, (T)((U)x * (U)y))                                \
    KERNEL(ATTR, T, P##_min, IMIN(x, y))                                       \
    KERNEL(ATTR, T, P##_max, IMAX(x, y))                                       \
    KERNEL(ATTR, T, P##_band, (T)(x & y))                                      \
    KERNEL(ATTR, T, P##_bor, (T)(x | y))                                       \
    KERNEL(ATTR, T, P##_bxor, (T)(x ^ y))

#define FLOAT_KERNELS(ATTR, T, P)                                              \
    KERNEL(ATTR, T, P##_sum, x + y)                                            \
    KERNEL(ATTR, T, P##_prod, x * y)                                           \
    KERNEL(ATTR, T, P##_min, FMIN(x, y))                                       \
    KERNEL(ATTR, T, P##_max, FMAX(x, y))

typedef void (*kernel_fn)(void *, const void *, const void *, size_t);
typedef kernel_fn kernel_table[PLX_DTYPE_COUNT][PLX_REDOP_COUNT];

/* Every (dtype, op) kernel with prefix X, and their table X##kernels. */
/* AVG runs SUM's kernel; floats have no bitwise kernels (NULL: refused). */
#define ROW(P) {P##_sum, P##_prod, P##_min, P##_max, P##_sum, P##_band, P##_bor, P##_bxor}
#define FROW(P) {P##_sum, P##_prod, P##_min, P##_max, P##_sum}
#define ALL_KERNELS(ATTR, X)                                                   \
    INT_KERNELS(ATTR, int8_t, uint8_t, X##i8)                                  \
    INT_KERNELS(ATTR, uint8_t, uint8_t, X##u8)                                 \
    INT_KERNELS(ATTR, int32_t, uint32_t, X##i32)                               \
    INT_KERNELS(ATTR, uint32_t, uint32_t, X##u32)                              \
    INT_KERNELS(ATTR, int64_t, uint64_t, X##i64)                               \
    INT_KERNELS(ATTR, uint64_t, uint64_t, X##u64)                              \
    FLOAT_KERNELS(ATTR, float, X##f32)                                         \
    FLOAT_KERNELS(ATTR, double, X##f64)                                        \
    static const kernel_table X##kernels = {                                   \
        [PLX_I8] = ROW(X##i8), [PLX_U8] = ROW(X##u8), [PLX_I32] = ROW(X##i32), \
        [PLX_U32] = ROW(X##u32), [PLX_I64] = ROW(X##i64), [PLX_U64] = ROW(X##u64), \
        [PLX_F32] = FROW(X##f32), [PLX_F64] = FROW(X##f64),                    \
    };

ALL_KERNELS(, )

#if defined(__x86_64__) && defined(__GNUC__)
ALL_KERNELS(__attribute__((target("avx2"))), avx2_)

/* The table for this CPU; __builtin_cpu_init is idempotent and the check
 * reads one global, so this is cheap enough to ask on every call. */
static const kernel_table *cpu_kernels(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") ? &avx2_kernels : &kernels;
}
#else
static const kernel_table *cpu_kernels(void)
{
    return &kernels;
}
#endif

/* f16/bf16: widen a block to f32, run the f32 kernel, round back. One
 * loop per format with the conversions inlined, so both vectorise. Blocks
 * are read before the output is written, so out may alias a or b. */
enum { BLOCK = 512 };

#define HALF_KERNEL(NAME, WIDEN, NARROW)                                       \
    static void NAME(int op, void *out_, const void *a_, const void *b_, size_t n) \
    {                                                                          \
        float fa[BLOCK], fb[BLOCK];                                            \
        uint16_t *out = out_;                                                  \
        const uint16_t *a = a_, *b = b_;                                       \
        kernel_fn k = (*cpu_kernels())[PLX_F32][op];                           \
        for (size_t base = 0; base < n; base += BLOCK) {                       \
            size_t m = n - base < BLOCK ? n - base : BLOCK;                    \
            for (size_t i = 0; i < m; i++) {                                   \
                fa[i] = WIDEN(a[base + i]);                                    \
                fb[i] = WIDEN(b[base + i]);                                    \
            }                                                                  \
            k(fa, fa, fb, m);                                                  \
            for (size_t i = 0; i < m; i++)                                     \
                out[base + i] = NARROW(fa[i]);                                 \
        }                                                                      \
    }

HALF_KERNEL(f16_kernel_generic, h2f, f2h)
HALF_KERNEL(bf16_kernel_generic, bf2f, f2bf)

/* x86-64 with F16C: the conversion instructions (round to nearest even,
 * subnormals, NaN quietened), 8 at a time, where the generic loop converts
 * each element with integer arithmetic. */
#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <immintrin.h>

__attribute__((target("avx2,f16c"))) static void f16_kernel_f16c(int op, void *out_, const void *a_, const void *b_,
                                                                  size_t n)
{
    float fa[BLOCK] __attribute__((aligned(32))), fb[BLOCK] __attribute__((aligned(32)));
    uint16_t *out = out_;
    const uint16_t *a = a_, *b = b_;
    kernel_fn k = avx2_kernels[PLX_F32][op];
    for (size_t base = 0; base < n; base += BLOCK) {
        size_t m = n - base < BLOCK ? n - base : BLOCK, i = 0;
        for (; i + 8 <= m; i += 8) {
            _mm256_store_ps(fa + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(a + base + i))));
            _mm256_store_ps(fb + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(b + base + i))));
        }
        for (; i < m; i++) {
            fa[i] = h2f(a[base + i]);
            fb[i] = h2f(b[base + i]);
        }
        k(fa, fa, fb, m);
        for (i = 0; i + 8 <= m; i += 8)
            _mm_storeu_si128((__m128i *)(out + base + i),
                             _mm256_cvtps_ph(_mm256_load_ps(fa + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
        for (; i < m; i++)
            out[base + i] = f2h(fa[i]);
    }
}

/* bf16 with AVX2: widening is a shift, narrowing the same integer rounding
 * as f2bf, 8 lanes at a time. */
__attribute__((target("avx2"))) static inline __m256 bf16x8_to_f32(const uint16_t *p)
{
    __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
}

__attribute__((target("avx2"))) static inline void f32x8_to_bf16(uint16_t *p, __m256 f)
{
    __m256i x = _mm256_castps_si256(f);
    __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(1));
    __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(x, _mm256_set1_epi32(0x7fff)), lsb), 16);
    __m256i quiet = _mm256_or_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(0x40));
    __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(x, _mm256_set1_epi32(0x7fffffff)),
                                     _mm256_set1_epi32(0x7f800000));
    __m256i r = _mm256_blendv_epi8(rounded, quiet, nan);
    /* 8 x u32 (all <= 0xffff) -> 8 x u16; packus works per 128-bit lane */
    __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0x08);
    _mm_storeu_si128((__m128i *)p, _mm256_castsi256_si128(packed));
}

__attribute__((target("avx2"))) static void bf16_kernel_avx2(int op, void *out_, const void *a_, const void *b_,
                                                             size_t n)
{
    float fa[BLOCK] __attribute__((aligned(32))), fb[BLOCK] __attribute__((aligned(32)));
    uint16_t *out = out_;
    const uint16_t *a = a_, *b = b_;
    kernel_fn k = avx2_kernels[PLX_F32][op];
    for (size_t base = 0; base < n; base += BLOCK) {
        size_t m = n - base < BLOCK ? n - base : BLOCK, i = 0;
        for (; i + 8 <= m; i += 8) {
            _mm256_store_ps(fa + i, bf16x8_to_f32(a + base + i));
            _mm256_store_ps(fb + i, bf16x8_to_f32(b + base + i));
        }
        for (; i < m; i++) {
            fa[i] = bf2f(a[base + i]);
            fb[i] = bf2f(b[base + i]);
        }
        k(fa, fa, fb, m);
        for (i = 0; i + 8 <= m; i += 8)
            f32x8_to_bf16(out + base + i, _mm256_load_ps(fa + i));
        for (; i < m; i++)
            out[base + i] = f2bf(fa[i]);
    }
}

static void bf16_kernel(int op, void *out, const void *a, const void *b, size_t n)
{
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2"))
        bf16_kernel_avx2(op, out, a, b, n);
    else
        bf16_kernel_generic(op, out, a, b, n);
}

/* F16C from CPUID leaf 1 (ECX bit 29): clang 14 has no "f16c" for
 * __builtin_cpu_supports, and this way both compilers build the file. */
static int has_f16c(void)
{
    static int known; /* 0 unknown, 1 no, 2 yes; cached since CPUID traps in a VM */
    int k = __atomic_load_n(&known, __ATOMIC_RELAXED);
    if (!k) {
        unsigned eax, ebx, ecx, edx;
        k = __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & (1u << 29)) ? 2 : 1;
        __atomic_store_n(&known, k, __ATOMIC_RELAXED);
    }
    return k == 2;
}

/* AVX2 and F16C: the f16 kernel's and the whole-buffer conversions' case. */
static int avx2_f16c(void)
{
    __builtin_cpu_init(); /* idempotent; the checks read one global */
    return __builtin_cpu_supports("avx2") && has_f16c();
}

static void f16_kernel(int op, void *out, const void *a, const void *b, size_t n)
{
    if (avx2_f16c())
        f16_kernel_f16c(op, out, a, b, n);
    else
        f16_kernel_generic(op, out, a, b, n);
}
#else
#define f16_kernel f16_kernel_generic
#define bf16_kernel bf16_kernel_generic
#endif

int plx__redop_takes(int dtype, int op)
{
    if (dtype < 0 || dtype >= PLX_DTYPE_COUNT || op < 0 || op >= PLX_REDOP_COUNT)
        return 0;
    return op < PLX_BAND || (dtype != PLX_F16 && dtype != PLX_BF16 && dtype != PLX_F32 && dtype != PLX_F64);
}

int plx__reduce3(void *out, const void *a, const void *b, size_t count, int dtype, int op)
{
    if (dtype < 0 || dtype >= PLX_DTYPE_COUNT || op < 0 || op >= PLX_REDOP_COUNT)
        return plx__err(PLX_ERR_INVALID_ARG, "reduce: invalid dtype %d or op %d", dtype, op);
    if (!plx__redop_takes(dtype, op))
        return plx__err(PLX_ERR_INVALID_ARG, "reduce: %s is a bitwise op, for integer types only, not %s",
                        plx_redop_name(op), plx_dtype_name(dtype));
    if (dtype == PLX_F16)
        f16_kernel(op, out, a, b, count);
    else if (dtype == PLX_BF16)
        bf16_kernel(op, out, a, b, count);
    else
        (*cpu_kernels())[dtype][op](out, a, b, count);
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
    case PLX_F16: {
        uint16_t *p = buf;
        for (size_t i = 0; i < count; i++)
            p[i] = f2h(h2f(p[i]) / (float)divisor);
        break;
    }
    case PLX_BF16: {
        uint16_t *p = buf;
        for (size_t i = 0; i < count; i++)
            p[i] = f2bf(bf2f(p[i]) / (float)divisor);
        break;
    }
    default:
        return plx__err(PLX_ERR_INVALID_ARG, "scale: invalid dtype %d", dtype);
    }
    return 0;
}

/* f16/bf16 <-> f32 over whole buffers (AVG's f32 copies, FSDP's mixed
 * precision): the conversion instructions where the CPU has them, with the
 * same bits as the generic loops (the division is IEEE either way). */
static void widen_div_generic(float *dst, const uint16_t *s, size_t count, int dtype, float d)
{
    if (dtype == PLX_F16)
        for (size_t i = 0; i < count; i++)
            dst[i] = h2f(s[i]) / d;
    else
        for (size_t i = 0; i < count; i++)
            dst[i] = bf2f(s[i]) / d;
}

static void narrow_generic(uint16_t *o, const float *src, size_t count, int dtype)
{
    if (dtype == PLX_F16)
        for (size_t i = 0; i < count; i++)
            o[i] = f2h(src[i]);
    else
        for (size_t i = 0; i < count; i++)
            o[i] = f2bf(src[i]);
}

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx2,f16c"))) static void widen_div_x86(float *dst, const uint16_t *s, size_t count, int dtype,
                                                               float d)
{
    __m256 dv = _mm256_set1_ps(d);
    size_t i = 0;
    for (; i + 8 <= count; i += 8) {
        __m256 f = dtype == PLX_F16 ? _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(s + i))) : bf16x8_to_f32(s + i);
        _mm256_storeu_ps(dst + i, _mm256_div_ps(f, dv));
    }
    widen_div_generic(dst + i, s + i, count - i, dtype, d);
}

__attribute__((target("avx2,f16c"))) static void narrow_x86(uint16_t *o, const float *src, size_t count, int dtype)
{
    size_t i = 0;
    for (; i + 8 <= count; i += 8) {
        __m256 f = _mm256_loadu_ps(src + i);
        if (dtype == PLX_F16)
            _mm_storeu_si128((__m128i *)(o + i), _mm256_cvtps_ph(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
        else
            f32x8_to_bf16(o + i, f);
    }
    narrow_generic(o + i, src + i, count - i, dtype);
}
#else
#define avx2_f16c() 0
#define widen_div_x86 widen_div_generic
#define narrow_x86 narrow_generic
#endif

int plx__widen_div(float *dst, const void *src, size_t count, int dtype, uint64_t divisor)
{
    if (dtype != PLX_F16 && dtype != PLX_BF16)
        return plx__err(PLX_ERR_INVALID_ARG, "widen: dtype %d is not f16 or bf16", dtype);
    if (avx2_f16c())
        widen_div_x86(dst, src, count, dtype, (float)divisor);
    else
        widen_div_generic(dst, src, count, dtype, (float)divisor);
    return 0;
}

int plx__narrow(void *dst, const float *src, size_t count, int dtype)
{
    if (dtype != PLX_F16 && dtype != PLX_BF16)
        return plx__err(PLX_ERR_INVALID_ARG, "narrow: dtype %d is not f16 or bf16", dtype);
    if (avx2_f16c())
        narrow_x86(dst, src, count, dtype);
    else
        narrow_generic(dst, src, count, dtype);
    return 0;
}
