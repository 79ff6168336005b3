/* convert.c - whole-buffer conversions between the float dtypes, for
 * libraries layered on plexus (mixed precision, compression hooks): the
 * same rounding as the reduction kernels, without reaching their header. */
#include <stdint.h>
#include <string.h>

#include "error.h"
#include "reduce.h"

static int is_float(int dtype)
{
    return dtype == PLX_F32 || dtype == PLX_F64 || dtype == PLX_F16 || dtype == PLX_BF16;
}

static double get(const void *p, int dtype, size_t i)
{
    switch (dtype) {
    case PLX_F32: return ((const float *)p)[i];
    case PLX_F64: return ((const double *)p)[i];
    case PLX_F16: return plx__f16_to_f32(((const uint16_t *)p)[i]);
    default: return plx__bf16_to_f32(((const uint16_t *)p)[i]);
    }
}

/* 16-bit types round from f32: a double rounds to f32 first. */
static void put(void *p, int dtype, size_t i, double v)
{
    switch (dtype) {
    case PLX_F32: ((float *)p)[i] = (float)v; break;
    case PLX_F64: ((double *)p)[i] = v; break;
    case PLX_F16: ((uint16_t *)p)[i] = plx__f32_to_f16((float)v); break;
    default: ((uint16_t *)p)[i] = plx__f32_to_bf16((float)v); break;
    }
}

PLX_API int plx_dtype_convert(void *dst, int dst_dtype, const void *src, int src_dtype, size_t count)
{
    if (!is_float(dst_dtype) || !is_float(src_dtype))
        return plx__err(PLX_ERR_INVALID_ARG, "plx_dtype_convert: %s to %s: only f32, f64, f16 and bf16 convert",
                        plx_dtype_name(src_dtype), plx_dtype_name(dst_dtype));
    if (count && (!dst || !src))
        return plx__err(PLX_ERR_INVALID_ARG, "plx_dtype_convert: NULL buffer");
    if (dst_dtype == src_dtype) {
        memmove(dst, src, count * plx_dtype_size(dst_dtype));
        return 0;
    }
    if (src_dtype == PLX_F32 && (dst_dtype == PLX_F16 || dst_dtype == PLX_BF16))
        return plx__narrow(dst, src, count, dst_dtype);
    for (size_t i = 0; i < count; i++)
        put(dst, dst_dtype, i, get(src, src_dtype, i));
    return 0;
}
