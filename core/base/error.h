/* error.h - per-thread error detail and name tables. Stability: internal. */
#ifndef PLX_CORE_ERROR_H
#define PLX_CORE_ERROR_H

#include <stdarg.h>

#include "plexus/plexus.h"

/* Record a detailed message for the calling thread and return status, so
 * callers can write `return plx__err(PLX_ERR_CONFIG, "%s:%d: ...", ...)`. */
int plx__err(int status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int plx__verr(int status, const char *fmt, va_list ap);
/* Prepend context to the calling thread's message: "allreduce(seq 3): <old>". */
void plx__err_prefix(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void plx__err_clear(void);

#endif
