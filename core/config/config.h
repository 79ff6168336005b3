/* config.h - the effective configuration of the process.
 *
 * Layers, later wins: built-in defaults (config_keys.h), the system dir
 * (${sysconfdir}/plexus), $XDG_CONFIG_HOME/plexus, $PLEXUS_CONFIG (a file, or
 * a dir holding plexus.ini and backends.d/), PLEXUS_<SECTION>_<KEY> variables,
 * then API options (config_file, overrides). Each dir contributes plexus.ini
 * and backends.d/ *.ini in name order. Every value remembers its origin
 * ("file:line", "env NAME", "option", "default").
 *
 * The config is process-wide, built on first use; values are never freed
 * (plugins keep the pointers), a later layer only replaces them.
 * Stability: internal. */
#ifndef PLX_CORE_CONFIG_H
#define PLX_CORE_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "plexus/plexus.h"

/* A backend declared by a drop-in: a section with a `library` key. */
struct plx__dropin {
    const char *section;  /* backend name */
    const char *file;     /* the INI file */
    int line;             /* line of the `library` key */
    const char *library;  /* resolved against the file's folder; NULL if missing */
    int priority;         /* [name] priority, default 50 */
    int enabled;          /* [name] enabled, default true */
};

/* Build (first call) or extend (later calls with new options) the process
 * config. Errors are "file:line: message" in plx_last_error(). */
int plx__config_load(const struct plx_comm_options *opt);
/* Effective value or NULL. Pointer valid for the process lifetime. */
const char *plx__config_get(const char *section, const char *key);
const char *plx__config_origin(const char *section, const char *key);
/* Typed getters for [core] keys and plugin keys; bad values are errors
 * naming the origin. */
int plx__config_get_int(const char *section, const char *key, int64_t def, int64_t *out);
int plx__config_get_bool(const char *section, const char *key, int def, int *out);

size_t plx__config_dropin_count(void);
const struct plx__dropin *plx__config_dropin(size_t i);

/* Iteration for plexus-info --config. */
size_t plx__config_entry_count(void);
int plx__config_entry_at(size_t i, const char **section, const char **key, const char **value,
                         const char **origin, const char **help);

/* Case-insensitive Levenshtein distance, for "did you mean" suggestions. */
int plx__edit_distance(const char *a, const char *b);

/* Reset everything (tests only). */
void plx__config_reset(void);

#endif
