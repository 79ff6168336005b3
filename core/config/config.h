/* config.h - the effective configuration of the process.
 *
 * Layers, later wins: built-in defaults (config_keys.h), the system dir
 * (${sysconfdir}/plexus), $XDG_CONFIG_HOME/plexus, $PLEXUS_CONFIG (a file, or
 * a dir holding plexus.ini and backends.d/), PLEXUS_<SECTION>_<KEY> variables,
 * then API options (config_file, overrides). Each dir contributes plexus.ini
 * and backends.d/ *.ini in name order. Every value remembers its origin
 * ("file:line", "env NAME", "option", "default").
 *
 * The files and variables are process layers, built on first use; their
 * values are never freed (plugins keep the pointers). The API options are
 * an overlay each communicator owns (struct plx_config), inherited by its
 * splits, so two communicators with different options each see their own.
 * Every read names the view it reads through (NULL: the process layers):
 * there is no implicit "current" view.
 * Stability: internal. */
#ifndef PLX_CORE_CONFIG_H
#define PLX_CORE_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "plexus/backend.h"
#include "plexus/plexus.h"

/* A backend declared by a drop-in: a section with a `library` key, or an
 * `alias` key naming backends it stands for. */
struct plx__dropin {
    const char *section;  /* backend name */
    const char *file;     /* the INI file */
    int line;             /* line of the `library` key */
    const char *library;  /* resolved against the file's folder; NULL if missing */
    const char *alias;    /* [name] alias: the backends it stands for ("a, b"); NULL if none */
    int priority;         /* [name] priority, default 50 */
    int enabled;          /* [name] enabled, default true */
};

/* Load the process layers (files, drop-ins, variables) once; later calls
 * return at once. Errors are "file:line: message" in plx_last_error(). */
int plx__config_load(void);

/* A communicator's configuration: the process layers (loaded if need be)
 * under opt's config_file and overrides, validated. *out starts with one
 * reference; the communicator owns it and its splits retain it. */
int plx__config_open(const struct plx_comm_options *opt, struct plx_config **out);
struct plx_config *plx__config_retain(struct plx_config *v);
void plx__config_release(struct plx_config *v);

/* The backend section v's communicator reads (its backend's name: an alias
 * reads its own section, not its target's). Set once, before v is shared. */
void plx__config_set_section(struct plx_config *v, const char *section);
const char *plx__config_section(const struct plx_config *v, const char *fallback);
/* A new view (one reference) with v's options that reads section: the
 * communicator of the next backend after one refused it (shm -> tcp), or a
 * child on another backend than its parent's (hier.c's intra child). */
int plx__config_derive(const struct plx_config *v, const char *section, struct plx_config **out);

/* A backend's typed keys (static storage, NULL-terminated): values the
 * process layers gave its section are checked now, the first bad one is the
 * error ("file:line: tcp.x = 'y' is not ..."); declared defaults become
 * entries with origin "default". */
int plx__config_declare(const char *section, const struct plx_key *keys);
/* Check the values v gives section against its (now declared) keys. */
int plx__config_check_view(const struct plx_config *v, const char *section);

/* Value of section.key through v (NULL: process layers only), or NULL.
 * *origin (if not NULL) gets where it came from. Valid as long as v. */
const char *plx__config_get_in(const struct plx_config *v, const char *section, const char *key,
                               const char **origin);
/* A number per the key's type (bytes, nanoseconds, 0/1; -1 for a word such
 * as "auto"), its declared default when unset; PLX_ERR_NOT_FOUND if neither. */
int plx__config_number_in(const struct plx_config *v, const char *section, const char *key, int64_t *out);

/* Typed reads of [section] key through v (NULL: the process layers): def
 * when unset and undeclared; a bad value is an error naming its origin
 * (*out keeps def). */
int plx__config_int_in(const struct plx_config *v, const char *section, const char *key, int64_t def, int64_t *out);
int plx__config_bool_in(const struct plx_config *v, const char *section, const char *key, int def, int *out);
/* A duration key (durations are read in ns) in milliseconds, rounded down:
 * its value, else its declared default (one default, in the key's table). */
int plx__config_ms_in(const struct plx_config *v, const char *section, const char *key, int64_t *ms);

size_t plx__config_dropin_count(void);
const struct plx__dropin *plx__config_dropin(size_t i);

/* Iteration for plexus-info --config: the process layers under v. */
struct plx__config_entry {
    const char *section, *key, *value, *origin, *help;
    const char *type; /* "bool", "size", ...; "string" for undeclared keys */
};
size_t plx__config_entry_count(const struct plx_config *v);
int plx__config_entry_at(const struct plx_config *v, size_t i, struct plx__config_entry *out);

/* Case-insensitive Levenshtein distance, for "did you mean" suggestions. */
int plx__edit_distance(const char *a, const char *b);

/* Reset everything (tests only). */
void plx__config_reset(void);

#endif
