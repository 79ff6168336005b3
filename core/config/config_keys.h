/* config_keys.h - the one table of configuration keys the core knows: type,
 * default and help. Drives defaults, validation, plexus-info --config and
 * the sample etc/plexus.ini. Stability: internal. */
#ifndef PLX_CORE_CONFIG_KEYS_H
#define PLX_CORE_CONFIG_KEYS_H

#include <stddef.h>
#include <stdint.h>

#include "plexus/backend.h"

/* Types are the plugin ABI's (enum plx_key_type), so one validator serves
 * the core's keys and every backend's. */
struct plx__key {
    const char *section; /* "core", or "*" for keys every backend section has */
    const char *key;
    int type;            /* enum plx_key_type */
    const char *def;     /* NULL: no default (unset) */
    const char *choices; /* ENUM, LIST: "a|b|c"; INT, UINT, SIZE, DURATION: extra words */
    const char *help;
};

extern const struct plx__key plx__keys[];
extern const size_t plx__nkeys;
const struct plx__key *plx__key_find(const char *section, const char *key);

/* Check value against type and choices; on error writes
 * "section.key = 'value' is not ..." to msg and returns -1. */
int plx__key_check(const char *section, const char *key, int type, const char *choices, const char *value,
                   char *msg, size_t len);
/* Parse a value that passed plx__key_check: BOOL gives 0/1, INT, UINT and
 * SIZE the number (bytes), DURATION nanoseconds, a choice word -1. */
int64_t plx__key_number(const char *key, int type, const char *value);
/* The type name plexus-info shows ("bool", "size", ...). */
const char *plx__key_type_name(int type);

#endif
