/* fsdp_precision.c - element conversions for mixed precision: master
 * shards (f32 typically) to gathered parameters in param_dtype, gradients
 * to reduce_dtype and back. 16-bit values go through f32 with
 * round-to-nearest-even (plx_dtype_convert). */
#include <stdint.h>
#include <string.h>

#include "fsdp_internal.h"

int plx__fsdp_dtype_ok(int dtype)
{
    return dtype == PLX_F32 || dtype == PLX_F64 || dtype == PLX_F16 || dtype == PLX_BF16;
}

double plx__fsdp_get(const void *p, int dtype, size_t i)
{
    double v = 0;
    plx_dtype_convert(&v, PLX_F64, (const char *)p + i * plx_dtype_size(dtype), dtype, 1);
    return v;
}

/* Store v; 16-bit types round from f32 (a double rounds to f32 first,
 * exact for values that came from f32 arithmetic). */
static void put(void *p, int dtype, size_t i, double v)
{
    plx_dtype_convert((char *)p + i * plx_dtype_size(dtype), dtype, &v, PLX_F64, 1);
}

void plx__fsdp_convert(void *dst, int ddt, const void *src, int sdt, size_t n)
{
    plx_dtype_convert(dst, ddt, src, sdt, n);
}

void plx__fsdp_accumulate(void *dst, int ddt, const void *src, int sdt, size_t n)
{
    if (ddt == PLX_F32 && sdt == PLX_F32) {
        float *d = dst;
        const float *s = src;
        for (size_t i = 0; i < n; i++)
            d[i] += s[i];
        return;
    }
    if (ddt == PLX_F64 && sdt == PLX_F64) {
        double *d = dst;
        const double *s = src;
        for (size_t i = 0; i < n; i++)
            d[i] += s[i];
        return;
    }
    /* f32 and 16-bit sums are done in f32, as PyTorch adds two tensors */
    for (size_t i = 0; i < n; i++) {
        double a = plx__fsdp_get(dst, ddt, i), b = plx__fsdp_get(src, sdt, i);
        put(dst, ddt, i, ddt == PLX_F64 ? a + b : (double)((float)a + (float)b));
    }
}

void plx__fsdp_scale(void *p, int dtype, size_t n, double scale)
{
    if (dtype == PLX_F32) {
        float *x = p;
        for (size_t i = 0; i < n; i++)
            x[i] = (float)(x[i] * scale);
        return;
    }
    for (size_t i = 0; i < n; i++)
        put(p, dtype, i, plx__fsdp_get(p, dtype, i) * scale);
}
