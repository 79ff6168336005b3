/* log.h - the one logger of the process, handed to plugins through the host.
 * Level from [core] log_level (error|warn|info|debug|trace); PLEXUS_DEBUG=
 * loader,store,tcp turns categories on at debug level ("all" for all).
 * Messages go to stderr as "plexus[pid] LEVEL category: text".
 * Stability: internal. */
#ifndef PLX_CORE_LOG_H
#define PLX_CORE_LOG_H

#include <stdarg.h>

#include "plexus/backend.h" /* enum plx_log_level */

/* level: enum plx_log_level (backend.h). category: "loader", "store", "tcp", ... */
void plx__log(int level, const char *category, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void plx__vlog(int level, const char *category, const char *fmt, va_list ap);
int plx__log_enabled(int level, const char *category);
/* Set the threshold from a name ("warn"); unknown names are ignored. */
void plx__log_set_level(const char *name);

#endif
