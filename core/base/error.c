/* error.c - the calling thread's detailed error message.
 * Thread-local, never shared: a message written by one thread can't be
 * overwritten by another, so a failure's detail reaches the thread that
 * failed even while other threads fail too. */
#include "error.h"

#include <stdio.h>
#include <string.h>

static _Thread_local char last_msg[1024];

int plx__verr(int status, const char *fmt, va_list ap)
{
    vsnprintf(last_msg, sizeof last_msg, fmt, ap);
    return status;
}

int plx__err(int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    plx__verr(status, fmt, ap);
    va_end(ap);
    return status;
}

void plx__err_prefix(const char *fmt, ...)
{
    char prefix[256], old[sizeof last_msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, last_msg, sizeof old);
    /* Concatenate by hand: truncation of a long message is intended. */
    size_t np = strlen(prefix), no = strlen(old);
    if (np > sizeof last_msg - 1)
        np = sizeof last_msg - 1;
    if (no > sizeof last_msg - 1 - np)
        no = sizeof last_msg - 1 - np;
    memcpy(last_msg, prefix, np);
    memcpy(last_msg + np, old, no);
    last_msg[np + no] = '\0';
}

void plx__err_clear(void)
{
    last_msg[0] = '\0';
}

PLX_API const char *plx_last_error(void)
{
    return last_msg;
}

PLX_API int plx_set_error(int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    plx__verr(status, fmt, ap);
    va_end(ap);
    return status;
}

PLX_API void plx_error_prefix(const char *fmt, ...)
{
    char prefix[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    plx__err_prefix("%s", prefix);
}
