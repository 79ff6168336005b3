/* info.h - run-time introspection: which backends exist, which work here
 * and why not, and the effective configuration with the origin of each value.
 *
 * Stability: stable API; the structs are caller-sized and append-only.
 * Used by plexus-info, and by programs that want to pick a backend that
 * works on this machine.
 */
#ifndef PLEXUS_INFO_H
#define PLEXUS_INFO_H

#include "plexus.h"

#ifdef __cplusplus
extern "C" {
#endif

enum plx_backend_state {
    PLX_STATE_DISCOVERED = 0, /* drop-in read, library not loaded yet */
    PLX_STATE_LOADED = 1,     /* library loaded and ABI accepted, not probed */
    PLX_STATE_USABLE = 2,
    PLX_STATE_UNAVAILABLE = 3, /* expected absence, with reason */
    PLX_STATE_BROKEN = 4,      /* load/ABI/probe failure, with reason */
    PLX_STATE_DISABLED = 5,    /* excluded by configuration */
};

/* One backend as the loader sees it. Strings are valid until the process
 * exits. Caller sets struct_size. */
struct plx_backend_info {
    uint32_t struct_size;
    const char *name;        /* the drop-in section, e.g. "tcp" */
    int32_t state;           /* enum plx_backend_state */
    const char *reason;      /* why (never NULL; for a usable one, what it will use, or "") */
    const char *library;     /* resolved path of the .so */
    const char *dropin;      /* the INI file that declared it */
    int32_t priority;        /* higher wins for backend = auto */
    uint32_t abi_major;      /* negotiated ABI; 0 if not loaded */
    uint32_t abi_minor;
    const char *version;     /* plugin's own version, "" if not loaded */
    const char *description;
    uint32_t cap_flags;      /* PLX_CAP_* (backend.h) */
    uint32_t collectives;    /* native: PLX_BIT(enum plx_coll) */
    uint32_t dtypes;
    uint32_t redops;
    uint32_t mem_kinds;
    uint32_t n_params;       /* config keys, see plx_backend_param() */
    /* ---- appended with backend ABI 1.12; older callers pass a smaller struct_size ---- */
    int32_t prepared;        /* 1: plx_coll_prepare's runs are the backend's own prepared calls, 0: plain calls */
};

/* Read the configuration and drop-ins, load and probe every backend
 * (idempotent; the first call does the work). opt may be NULL; only its
 * config_file and overrides are used. */
PLX_API int plx_backends_discover(const struct plx_comm_options *opt);
PLX_API size_t plx_backend_count(void);
/* Fill *out for backend i (0 <= i < count), in priority order. */
PLX_API int plx_backend_info(size_t i, struct plx_backend_info *out);
/* Index of the backend named name, or PLX_ERR_NOT_FOUND (with a "did you
 * mean" suggestion in plx_last_error()). */
PLX_API int plx_backend_find(const char *name);
/* Config key j of backend i: key, default and help (static storage). */
PLX_API int plx_backend_param(size_t i, size_t j, const char **key, const char **default_value,
                              const char **help);
PLX_API const char *plx_backend_state_name(int state);
/* Resolve a selection ("auto", "nccl,tcp", "^mpi", NULL for the configured
 * one) to the backend that would serve plx_comm_init. Returns its index, or
 * an error with the reason in plx_last_error(). */
PLX_API int plx_backend_select(const char *spec);
/* The same, with the choice in words into why (n bytes): for auto, the
 * placement the launcher's variables give and what it put first. */
PLX_API int plx_backend_select_why(const char *spec, char *why, size_t n);

/* The effective configuration: every known key plus every key set by a
 * file or variable. Caller sets struct_size. */
struct plx_config_entry {
    uint32_t struct_size;
    const char *section;
    const char *key;
    const char *value;  /* effective value */
    const char *origin; /* "default", "/etc/plexus/plexus.ini:12",
                           "env PLEXUS_CORE_TIMEOUT_MS", "option" */
    const char *help;   /* "" for keys no table describes */
    /* ---- appended with backend ABI 1.3; older callers pass a smaller struct_size ---- */
    const char *type;   /* "string", "bool", "int", "uint", "size", "duration", "enum", "list" */
};
PLX_API size_t plx_config_count(void);
PLX_API int plx_config_entry(size_t i, struct plx_config_entry *out);

#ifdef __cplusplus
}
#endif
#endif
