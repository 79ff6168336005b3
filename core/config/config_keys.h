/* config_keys.h - the one table of configuration keys the core knows: type,
 * default and help. Drives defaults, validation, plexus-info --config and
 * the sample etc/plexus.ini. Stability: internal. */
#ifndef PLX_CORE_CONFIG_KEYS_H
#define PLX_CORE_CONFIG_KEYS_H

#include <stddef.h>

enum plx__key_type { PLX__KEY_STRING, PLX__KEY_INT, PLX__KEY_BOOL, PLX__KEY_ENUM };

struct plx__key {
    const char *section; /* "core", or "*" for keys every backend section has */
    const char *key;
    int type;
    const char *def;     /* NULL: no default (unset) */
    const char *choices; /* PLX__KEY_ENUM: "a|b|c" */
    const char *help;
};

extern const struct plx__key plx__keys[];
extern const size_t plx__nkeys;
const struct plx__key *plx__key_find(const char *section, const char *key);

#endif
