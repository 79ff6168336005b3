/* names.c - names of statuses, dtypes, reduction ops and collectives. */
#include <string.h>
#include <strings.h>

#include "callname.h"
#include "plexus/plexus.h"

PLX_API const char *plx_version(void)
{
    return PLEXUS_VERSION;
}

PLX_API const char *plx_err_name(int status)
{
    switch (status) {
    case PLX_OK: return "PLX_OK";
#define NAME_CASE(name, val, msg) case PLX_ERR_##name: return "PLX_ERR_" #name;
    PLX_ERRNO_MAP(NAME_CASE)
#undef NAME_CASE
    }
    return "PLX_ERR_UNKNOWN";
}

PLX_API const char *plx_strerror(int status)
{
    switch (status) {
    case PLX_OK: return "success";
#define MSG_CASE(name, val, msg) case PLX_ERR_##name: return msg;
    PLX_ERRNO_MAP(MSG_CASE)
#undef MSG_CASE
    }
    return "unknown error";
}

/* The names themselves are common/'s (callname.c), which the plugins share;
 * here the sizes and the other spellings plx_dtype_from_name accepts. */
static const struct {
    size_t size;
    const char *aliases[4];
} dtypes[PLX_DTYPE_COUNT] = {
    [PLX_I8] = {1, {"int8", "char"}},
    [PLX_U8] = {1, {"uint8", "byte"}},
    [PLX_I32] = {4, {"int32", "int"}},
    [PLX_U32] = {4, {"uint32"}},
    [PLX_I64] = {8, {"int64", "long"}},
    [PLX_U64] = {8, {"uint64"}},
    [PLX_F16] = {2, {"float16", "half"}},
    [PLX_BF16] = {2, {"bfloat16"}},
    [PLX_F32] = {4, {"float32", "float"}},
    [PLX_F64] = {8, {"float64", "double"}},
};

PLX_API size_t plx_dtype_size(int dtype)
{
    return dtype >= 0 && dtype < PLX_DTYPE_COUNT ? dtypes[dtype].size : 0;
}

PLX_API const char *plx_dtype_name(int dtype)
{
    return plx__dtype_str(dtype);
}

PLX_API const char *plx_redop_name(int op)
{
    return plx__redop_str(op);
}

PLX_API const char *plx_coll_name(int coll)
{
    return plx__coll_str(coll);
}

PLX_API int plx_dtype_from_name(const char *name)
{
    if (!name)
        return -1;
    for (int i = 0; i < PLX_DTYPE_COUNT; i++) {
        if (!strcasecmp(name, plx__dtype_str(i)))
            return i;
        for (int j = 0; j < 4 && dtypes[i].aliases[j]; j++)
            if (!strcasecmp(name, dtypes[i].aliases[j]))
                return i;
    }
    return -1;
}

PLX_API int plx_redop_from_name(const char *name)
{
    for (int i = 0; name && i < PLX_REDOP_COUNT; i++)
        if (!strcasecmp(name, plx__redop_str(i)))
            return i;
    return -1;
}
