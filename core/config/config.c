/* config.c - layered configuration: defaults, INI files and drop-ins (inih),
 * PLEXUS_<SECTION>_<KEY> variables (the process layers, loaded once), and
 * per communicator the API options as an overlay (struct plx_config); each
 * value keeps its origin and is validated once against its key's type.
 *
 * Debian's libinih is built without INI_HANDLER_LINENO, so line numbers come
 * from our own line reader passed to ini_parse_stream (inih asks it for one
 * line at a time), which also keeps the text of each line for messages. */
#include "config.h"

#include <ctype.h>
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <ini.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "config_keys.h"
#include "error.h"
#include "log.h"

extern char **environ;

struct entry {
    char *section, *key;
    const char *value, *origin; /* files, env (never freed: plugins keep pointers) */
};

/* A communicator's view: its options over the process layers. Immutable
 * once built, shared by reference with the communicator's splits. */
struct plx_config {
    int refs;
    char *section; /* the communicator's backend (plx__config_set_section) */
    size_t n;
    struct entry *items;
};

/* The keys a loaded backend declared for its section (plx__config_declare). */
struct declared {
    char *section;
    const struct plx_key *keys;
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct entry *entries;
static size_t n_entries, cap_entries;
static struct plx__dropin *dropins;
static size_t n_dropins;
static int loaded;
static struct declared *declared;
static size_t n_declared;

/* Every string the config hands out lives as long as the process (plugins
 * keep the pointers), so all of them are kept here, reachable, never freed. */
static char **arena;
static size_t n_arena, cap_arena;

static char *keep(char *s)
{
    if (s && n_arena == cap_arena) {
        size_t cap = cap_arena ? cap_arena * 2 : 256;
        char **a = realloc(arena, cap * sizeof *a);
        if (!a)
            return s; /* still valid, only no longer tracked */
        arena = a;
        cap_arena = cap;
    }
    if (s)
        arena[n_arena++] = s;
    return s;
}

static char *kept_strdup(const char *s)
{
    return keep(strdup(s));
}

/* ---- entries ------------------------------------------------------------ */

static struct entry *find(const char *section, const char *key)
{
    for (size_t i = 0; i < n_entries; i++)
        if (!strcasecmp(entries[i].section, section) && !strcasecmp(entries[i].key, key))
            return &entries[i];
    return NULL;
}

static char *lower_dup(const char *s)
{
    char *d = kept_strdup(s);
    for (char *p = d; p && *p; p++)
        *p = (char)tolower((unsigned char)*p);
    return d;
}

static struct entry *upsert(const char *section, const char *key)
{
    struct entry *e = find(section, key);
    if (e)
        return e;
    if (n_entries == cap_entries) {
        size_t cap = cap_entries ? cap_entries * 2 : 64;
        struct entry *ne = realloc(entries, cap * sizeof *ne);
        if (!ne)
            return NULL;
        entries = ne;
        cap_entries = cap;
    }
    e = &entries[n_entries++];
    memset(e, 0, sizeof *e);
    e->section = lower_dup(section);
    e->key = lower_dup(key);
    return e;
}

/* ---- validation --------------------------------------------------------- */

int plx__edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 63 || lb > 63)
        return 99;
    int d[64][64];
    for (size_t i = 0; i <= la; i++)
        d[i][0] = (int)i;
    for (size_t j = 0; j <= lb; j++)
        d[0][j] = (int)j;
    for (size_t i = 1; i <= la; i++)
        for (size_t j = 1; j <= lb; j++) {
            int c = d[i - 1][j - 1] + (tolower((unsigned char)a[i - 1]) != tolower((unsigned char)b[j - 1]));
            int del = d[i - 1][j] + 1, ins = d[i][j - 1] + 1;
            d[i][j] = c < del ? (c < ins ? c : ins) : (del < ins ? del : ins);
            /* Two letters swapped are one typo ("tpc" is "tcp", not "mpi"). */
            if (i > 1 && j > 1 && tolower((unsigned char)a[i - 1]) == tolower((unsigned char)b[j - 2]) &&
                tolower((unsigned char)a[i - 2]) == tolower((unsigned char)b[j - 1]) && d[i - 2][j - 2] + 1 < d[i][j])
                d[i][j] = d[i - 2][j - 2] + 1;
        }
    return d[la][lb];
}

static const struct plx_key *declared_key(const char *section, const char *key, int *section_declared)
{
    *section_declared = 0;
    for (size_t i = 0; i < n_declared; i++)
        if (!strcasecmp(declared[i].section, section)) {
            *section_declared = 1;
            for (const struct plx_key *k = declared[i].keys; k->key; k++)
                if (!strcasecmp(k->key, key))
                    return k;
        }
    return NULL;
}

/* "unknown key 'k' in [s]", with the nearest known key when it is close. */
static void unknown_key(const char *section, const char *key, char *msg, size_t len)
{
    const char *best = NULL;
    int bd = 99;
    for (size_t i = 0; i < plx__nkeys; i++) {
        int d = strcasecmp(plx__keys[i].section, section) && (strcmp(plx__keys[i].section, "*") ||
                                                                !strcasecmp(section, "core"))
                    ? 99
                    : plx__edit_distance(key, plx__keys[i].key);
        if (d < bd) {
            bd = d;
            best = plx__keys[i].key;
        }
    }
    for (size_t i = 0; i < n_declared; i++)
        for (const struct plx_key *k = declared[i].keys; !strcasecmp(declared[i].section, section) && k->key; k++) {
            int d = plx__edit_distance(key, k->key);
            if (d < bd) {
                bd = d;
                best = k->key;
            }
        }
    if (best && bd <= 3)
        snprintf(msg, len, "unknown key '%s' in [%s] (did you mean '%s'?)", key, section, best);
    else
        snprintf(msg, len, "unknown key '%s' in [%s]", key, section);
}

/* Check value against the key's declaration; fills msg on error. A key of a
 * backend that has not declared its keys (not loaded yet, or older than ABI
 * 1.3) passes here and is checked when the backend declares them. */
static int validate(const char *section, const char *key, const char *value, char *msg, size_t len)
{
    const struct plx__key *k = plx__key_find(section, key);
    if (k)
        return plx__key_check(section, key, k->type, k->choices, value, msg, len);
    int known_section;
    const struct plx_key *d = declared_key(section, key, &known_section);
    if (d)
        return plx__key_check(section, key, d->type, d->choices, value, msg, len);
    if (!strcasecmp(section, "core") || known_section) {
        unknown_key(section, key, msg, len);
        return -1;
    }
    return 0;
}

/* The declared type of section.key: the core's table, then the backend's
 * keys; STRING when nobody declared it. */
static int type_of(const char *section, const char *key, const char **def, const char **choices)
{
    const struct plx__key *k = plx__key_find(section, key);
    int known;
    const struct plx_key *d = k ? NULL : declared_key(section, key, &known);
    if (def)
        *def = k ? k->def : d ? d->default_value : NULL;
    if (choices)
        *choices = k ? k->choices : d ? d->choices : NULL;
    return k ? k->type : d ? d->type : PLX_KEY_STRING;
}

/* ---- INI files ---------------------------------------------------------- */

struct parse {
    struct plx_config *into; /* an options file: its values go to this view */
    const char *file;
    char dir[PATH_MAX];
    FILE *f;
    int line;
    char *buf;         /* the current line (getline's) */
    size_t cap;
    char err[512];     /* first error of our own */
    int err_line;
};

static void parse_error(struct parse *p, const char *what)
{
    if (!p->err[0]) {
        snprintf(p->err, sizeof p->err, "%s:%d: %s", p->file, p->line, what);
        p->err_line = p->line;
    }
}

/* inih's reader: one physical line per call, counted. getline, not fgets:
 * a NUL byte (a binary or compressed file named by mistake) would end the
 * line there unseen, and a file of them read as blank lines. */
static char *read_line(char *str, int num, void *stream)
{
    struct parse *p = stream;
    ssize_t n = getline(&p->buf, &p->cap, p->f);
    if (n < 0)
        return NULL;
    p->line++;
    int whole = n < num - 1 || (n == num - 1 && p->buf[n - 1] == '\n');
    int nul = memchr(p->buf, '\0', (size_t)n) != NULL;
    if (nul || !whole) {
        char what[64];
        snprintf(what, sizeof what, "line longer than %d characters", num - 2);
        parse_error(p, nul ? "a NUL byte: not a text file" : what);
        str[0] = '\0';
        return str;
    }
    memcpy(str, p->buf, (size_t)n + 1);
    return str;
}

/* A section with `library` declares a backend; one with `alias` (and no
 * library) a name for the first usable backend of a list. */
static void set_dropin(const char *section, const char *file, int line, const char *dir, const char *key,
                       const char *value)
{
    char path[PATH_MAX];
    int is_alias = !strcasecmp(key, "alias");
    if (is_alias || value[0] == '/')
        snprintf(path, sizeof path, "%s", value);
    else
        snprintf(path, sizeof path, "%s/%s", dir, value);
    for (size_t i = 0; i < n_dropins; i++)
        if (!strcasecmp(dropins[i].section, section)) {
            dropins[i].file = kept_strdup(file);
            dropins[i].line = line;
            if (is_alias)
                dropins[i].alias = kept_strdup(path);
            else
                dropins[i].library = kept_strdup(path);
            return;
        }
    struct plx__dropin *nd = realloc(dropins, (n_dropins + 1) * sizeof *nd);
    if (!nd)
        return;
    dropins = nd;
    dropins[n_dropins++] = (struct plx__dropin){
        .section = lower_dup(section), .file = kept_strdup(file), .line = line,
        .library = is_alias ? NULL : kept_strdup(path), .alias = is_alias ? kept_strdup(path) : NULL,
        .priority = 50, .enabled = 1,
    };
}

static int set_value(const char *section, const char *key, const char *value, const char *origin)
{
    struct entry *e = upsert(section, key);
    if (!e)
        return plx__err(PLX_ERR_NOMEM, "config: out of memory");
    e->value = kept_strdup(value);
    e->origin = kept_strdup(origin);
    return 0;
}

static struct entry *view_find(const struct plx_config *v, const char *section, const char *key)
{
    for (size_t i = 0; v && i < v->n; i++)
        if (!strcasecmp(v->items[i].section, section) && !strcasecmp(v->items[i].key, key))
            return &v->items[i];
    return NULL;
}

/* A view's strings are its own (freed with it). */
static int view_set(struct plx_config *v, const char *section, const char *key, const char *value,
                    const char *origin)
{
    struct entry *e = view_find(v, section, key);
    if (!e) {
        struct entry *ni = realloc(v->items, (v->n + 1) * sizeof *ni);
        if (!ni)
            return plx__err(PLX_ERR_NOMEM, "config: out of memory");
        v->items = ni;
        e = &v->items[v->n++];
        *e = (struct entry){.section = strdup(section), .key = strdup(key)};
        for (char *c = e->section; c && *c; c++)
            *c = (char)tolower((unsigned char)*c);
        for (char *c = e->key; c && *c; c++)
            *c = (char)tolower((unsigned char)*c);
    } else {
        free((char *)e->value);
        free((char *)e->origin);
    }
    e->value = strdup(value);
    e->origin = strdup(origin);
    if (!e->section || !e->key || !e->value || !e->origin)
        return plx__err(PLX_ERR_NOMEM, "config: out of memory");
    return 0;
}

static int on_pair(void *user, const char *section, const char *key, const char *value)
{
    struct parse *p = user;
    char origin[PATH_MAX + 32], msg[384];
    if (!section[0]) {
        if (!p->err[0]) {
            snprintf(p->err, sizeof p->err, "%s:%d: '%s' is outside any [section]", p->file, p->line, key);
            p->err_line = p->line;
        }
        return 0;
    }
    if (validate(section, key, value, msg, sizeof msg) != 0) {
        if (!p->err[0]) {
            snprintf(p->err, sizeof p->err, "%s:%d: %s", p->file, p->line, msg);
            p->err_line = p->line;
        }
        return 0;
    }
    snprintf(origin, sizeof origin, "%s:%d", p->file, p->line);
    if (p->into)
        view_set(p->into, section, key, value, origin);
    else
        set_value(section, key, value, origin);
    if ((!strcasecmp(key, "library") || !strcasecmp(key, "alias")) && strcasecmp(section, "core"))
        set_dropin(section, p->file, p->line, p->dir, key, value);
    return 1;
}

/* The one place that adapts inih's "nonzero is success" handler result. */
static int parse_file(const char *file, struct plx_config *into)
{
    struct parse p = {.file = file, .into = into};
    p.f = fopen(file, "r");
    if (!p.f)
        return plx__err(PLX_ERR_CONFIG, "%s: cannot open: %s", file, strerror(errno));
    snprintf(p.dir, sizeof p.dir, "%s", file);
    char *slash = strrchr(p.dir, '/');
    if (slash)
        *slash = '\0';
    else
        snprintf(p.dir, sizeof p.dir, ".");
    int rc = ini_parse_stream(read_line, &p, on_pair, &p);
    fclose(p.f);
    free(p.buf);
    if (rc == 0 && !p.err[0])
        return 0;
    /* Report whichever error comes first in the file: ours or inih's. */
    if (p.err[0] && (rc <= 0 || p.err_line <= rc))
        return plx__err(PLX_ERR_CONFIG, "%s", p.err);
    if (rc < 0)
        return plx__err(PLX_ERR_CONFIG, "%s: cannot read (inih error %d)", file, rc);
    /* A syntax error inih found on line rc: say what is wrong with it. */
    FILE *f = fopen(file, "r");
    char text[1024] = "";
    for (int i = 0; f && i < rc && fgets(text, sizeof text, f); i++)
        ;
    if (f)
        fclose(f);
    text[strcspn(text, "\r\n")] = '\0';
    const char *t = text;
    while (isspace((unsigned char)*t))
        t++;
    const char *why = *t == '[' ? "section header without ']'" : "expected 'key = value'";
    return plx__err(PLX_ERR_CONFIG, "%s:%d: %s: %s", file, rc, why, t);
}

static int is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static int exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* dir/plexus.ini, then dir/backends.d/ *.ini in name order. */
static int parse_dir(const char *dir, struct plx_config *into)
{
    char path[PATH_MAX];
    int rc;
    snprintf(path, sizeof path, "%s/plexus.ini", dir);
    if (exists(path) && (rc = parse_file(path, into)) != 0)
        return rc;
    snprintf(path, sizeof path, "%s/backends.d", dir);
    DIR *d = opendir(path);
    if (!d)
        return 0;
    char **names = NULL;
    size_t n = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        size_t len = strlen(de->d_name);
        if (len > 4 && !strcmp(de->d_name + len - 4, ".ini")) {
            char **nn = realloc(names, (n + 1) * sizeof *nn);
            if (!nn)
                break;
            names = nn;
            names[n++] = strdup(de->d_name);
        }
    }
    closedir(d);
    if (n) /* an empty backends.d: names is NULL, which qsort must not get */
        qsort(names, n, sizeof *names, cmp_str);
    rc = 0;
    for (size_t i = 0; i < n; i++) {
        snprintf(path, sizeof path, "%s/backends.d/%s", dir, names[i]);
        if (rc == 0)
            rc = parse_file(path, into);
        free(names[i]);
    }
    free(names);
    return rc;
}

static int parse_path_or_dir(const char *p, struct plx_config *into)
{
    return is_dir(p) ? parse_dir(p, into) : parse_file(p, into);
}

/* ---- environment -------------------------------------------------------- */

/* PLEXUS_* variables that are not PLEXUS_<SECTION>_<KEY> settings. */
static const char *const other_variables[] = {
    "PLEXUS_BACKEND", "PLEXUS_INIT", "PLEXUS_CONFIG", "PLEXUS_CONFIG_PATH", "PLEXUS_DEBUG",
    "PLEXUS_JOB_SECRET", "PLEXUS_STORE_HOSTED", "PLEXUS_LIBRARY", "PLEXUS_INFO",
    /* the build tree's own, for its tests and scripts */
    "PLEXUS_SOURCE_ROOT", "PLEXUS_BUILD_ROOT", "PLEXUS_MESON_ARGS",
};

/* A misspelt variable would otherwise be ignored without a word: warn, with
 * the closest name (a misspelt section keeps the rest of the name). */
static void unknown_variable(const char *name, const char **sections, size_t ns)
{
    for (size_t i = 0; i < sizeof other_variables / sizeof *other_variables; i++)
        if (!strcmp(name, other_variables[i]))
            return;
    char best[256] = "";
    int bd = 99;
    for (size_t i = 0; i < sizeof other_variables / sizeof *other_variables; i++) {
        int d = plx__edit_distance(name, other_variables[i]);
        if (d < bd) {
            bd = d;
            snprintf(best, sizeof best, "%s", other_variables[i]);
        }
    }
    const char *rest = strchr(name + 7, '_'); /* PLEXUS_<section>_<rest> */
    if (rest) {
        char guess[64];
        snprintf(guess, sizeof guess, "%.*s", (int)(rest - (name + 7)), name + 7);
        for (size_t j = 0; j < ns; j++) {
            int d = plx__edit_distance(guess, sections[j]);
            if (d < bd) {
                bd = d;
                snprintf(best, sizeof best, "PLEXUS_%s%s", sections[j], rest);
                for (char *c = best; *c; c++)
                    *c = *c == '-' ? '_' : (char)toupper((unsigned char)*c);
            }
        }
    }
    /* Only a near miss is a typo: other programs' PLEXUS_* names pass quietly. */
    if (bd <= 2)
        plx__log(PLX_LOG_WARN, "config", "environment %s is not a plexus setting and is ignored (did you mean %s?)",
                 name, best);
}

/* A section that is not [core], no drop-in's backend and no alias would be
 * ignored without a word: warn, with the closest known section. */
static void warn_unknown_sections(void)
{
    for (size_t i = 0; i < n_entries; i++) {
        const char *sec = entries[i].section;
        int known = !strcasecmp(sec, "core"), seen = 0;
        for (size_t j = 0; !known && j < n_dropins; j++)
            known = !strcasecmp(sec, dropins[j].section);
        for (size_t j = 0; j < i && !seen; j++)
            seen = !strcasecmp(sec, entries[j].section);
        if (known || seen)
            continue;
        const char *best = "core";
        int bd = plx__edit_distance(sec, "core");
        for (size_t j = 0; j < n_dropins; j++) {
            int d = plx__edit_distance(sec, dropins[j].section);
            if (d < bd) {
                bd = d;
                best = dropins[j].section;
            }
        }
        char hint[96] = "";
        if (bd <= 2)
            snprintf(hint, sizeof hint, "; did you mean [%s]?", best);
        plx__log(PLX_LOG_WARN, "config", "%s: unknown section [%s]: no backend of that name is installed, its keys "
                 "are ignored%s", entries[i].origin, sec, hint);
    }
}

/* PLEXUS_<SECTION>_<KEY>: sections known from the table and the files;
 * '-' in a section name is '_' in the variable. The longest section wins. */
static int apply_env(void)
{
    size_t n_sections = n_entries + 1;
    const char **sections = calloc(n_sections, sizeof *sections);
    if (!sections)
        return plx__err(PLX_ERR_NOMEM, "config: out of memory");
    size_t ns = 0;
    sections[ns++] = "core";
    for (size_t i = 0; i < n_entries; i++) {
        int seen = 0;
        for (size_t j = 0; j < ns; j++)
            seen |= !strcasecmp(sections[j], entries[i].section);
        if (!seen)
            sections[ns++] = entries[i].section;
    }
    int rc = 0;
    for (char **ev = environ; rc == 0 && ev && *ev; ev++) {
        if (strncmp(*ev, "PLEXUS_", 7))
            continue;
        const char *eq = strchr(*ev, '=');
        if (!eq)
            continue;
        char name[256];
        size_t nl = (size_t)(eq - *ev);
        if (nl >= sizeof name)
            continue;
        memcpy(name, *ev, nl);
        name[nl] = '\0';
        const char *value = eq + 1, *sect = NULL, *key = NULL;
        if (!strcmp(name, "PLEXUS_BACKEND")) {
            sect = "core";
            key = "backend";
        } else {
            size_t best = 0;
            for (size_t j = 0; j < ns; j++) {
                char prefix[128];
                int m = snprintf(prefix, sizeof prefix, "PLEXUS_%s_", sections[j]);
                for (char *c = prefix; *c; c++)
                    *c = *c == '-' ? '_' : (char)toupper((unsigned char)*c);
                if (m > 0 && (size_t)m > best && !strncmp(name, prefix, (size_t)m) && name[m]) {
                    best = (size_t)m;
                    sect = sections[j];
                    key = name + m;
                }
            }
        }
        if (!sect) {
            unknown_variable(name, sections, ns);
            continue;
        }
        char lkey[128];
        snprintf(lkey, sizeof lkey, "%s", key);
        for (char *c = lkey; *c; c++)
            *c = (char)tolower((unsigned char)*c);
        char msg[384], origin[300];
        if (validate(sect, lkey, value, msg, sizeof msg) != 0) {
            rc = plx__err(PLX_ERR_CONFIG, "environment %s: %s", name, msg);
            break;
        }
        snprintf(origin, sizeof origin, "env %s", name);
        set_value(sect, lkey, value, origin);
        if (!strcmp(lkey, "library") || !strcmp(lkey, "alias"))
            set_dropin(sect, origin, 0, ".", lkey, value);
    }
    free(sections);
    return rc;
}

/* ---- options: a communicator's view ---------------------------------------- */

static void view_free(struct plx_config *v)
{
    for (size_t i = 0; v && i < v->n; i++) {
        free(v->items[i].section);
        free(v->items[i].key);
        free((char *)v->items[i].value);
        free((char *)v->items[i].origin);
    }
    if (v) {
        free(v->items);
        free(v->section);
    }
    free(v);
}

static int apply_options(const struct plx_comm_options *opt, struct plx_config *v)
{
    int rc;
    if (opt->config_file && (rc = parse_path_or_dir(opt->config_file, v)) != 0)
        return rc;
    for (const char *const *o = opt->overrides; o && *o; o++) {
        const char *dot = strchr(*o, '.'), *eq = strchr(*o, '=');
        if (!dot || !eq || dot > eq || dot == *o || eq == dot + 1)
            return plx__err(PLX_ERR_CONFIG, "option '%s': expected section.key=value", *o);
        char section[128], key[128], msg[384];
        snprintf(section, sizeof section, "%.*s", (int)(dot - *o), *o);
        snprintf(key, sizeof key, "%.*s", (int)(eq - dot - 1), dot + 1);
        if (validate(section, key, eq + 1, msg, sizeof msg) != 0)
            return plx__err(PLX_ERR_CONFIG, "option '%s': %s", *o, msg);
        if ((rc = view_set(v, section, key, eq + 1, "option")) != 0)
            return rc;
    }
    return 0;
}

/* ---- loading -------------------------------------------------------------- */

/* True for the libplexus in its own build folder (a program of the build tree
 * linked by rpath, not installed): it reads the build tree's drop-ins, as
 * `meson devenv` would, so `build/tools/plexus-info` and the examples find the
 * uninstalled plugins. An installed copy never lives in the build folder. */
static int running_from_build_tree(void)
{
    Dl_info info;
    char lib[PATH_MAX], dir[PATH_MAX];
    if (!dladdr((void *)running_from_build_tree, &info) || !info.dli_fname ||
        !realpath(info.dli_fname, lib) || !realpath(PLEXUS_BUILD_LIBDIR, dir))
        return 0;
    char *slash = strrchr(lib, '/');
    if (!slash)
        return 0;
    *slash = '\0';
    return strcmp(lib, dir) == 0;
}

static int load_files_and_env(void)
{
    for (size_t i = 0; i < plx__nkeys; i++)
        if (strcmp(plx__keys[i].section, "*") && plx__keys[i].def)
            set_value(plx__keys[i].section, plx__keys[i].key, plx__keys[i].def, "default");
    int rc = 0;
    const char *path = getenv("PLEXUS_CONFIG_PATH");
    if (path) {
        char *copy = strdup(path), *save = NULL;
        for (char *d = strtok_r(copy, ":", &save); d && rc == 0; d = strtok_r(NULL, ":", &save))
            rc = parse_dir(d, NULL);
        free(copy);
    } else if (running_from_build_tree()) {
        rc = parse_dir(PLEXUS_BUILD_CONFIG, NULL);
    } else {
        char user[PATH_MAX];
        const char *xdg = getenv("XDG_CONFIG_HOME"), *home = getenv("HOME");
        rc = parse_dir(PLEXUS_SYSCONFDIR, NULL);
        if (rc == 0 && (xdg || home)) {
            if (xdg && xdg[0])
                snprintf(user, sizeof user, "%s/plexus", xdg);
            else
                snprintf(user, sizeof user, "%s/.config/plexus", home);
            rc = parse_dir(user, NULL);
        }
    }
    const char *extra = getenv("PLEXUS_CONFIG");
    if (rc == 0 && extra && extra[0]) {
        if (!exists(extra))
            rc = plx__err(PLX_ERR_CONFIG, "PLEXUS_CONFIG=%s: no such file or folder", extra);
        else
            rc = parse_path_or_dir(extra, NULL);
    }
    return rc ? rc : apply_env();
}

static int load_locked(void)
{
    if (loaded)
        return 0;
    int rc = load_files_and_env();
    if (rc)
        return rc;
    loaded = 1;
    warn_unknown_sections();
    /* Drop-in flags come from the process layers (drop-ins are process-wide). */
    for (size_t i = 0; i < n_dropins; i++) {
        struct entry *e;
        if ((e = find(dropins[i].section, "priority")) && e->value)
            dropins[i].priority = (int)plx__key_number("priority", PLX_KEY_INT, e->value);
        if ((e = find(dropins[i].section, "enabled")) && e->value)
            dropins[i].enabled = (int)plx__key_number("enabled", PLX_KEY_BOOL, e->value);
    }
    return 0;
}

int plx__config_load(void)
{
    pthread_mutex_lock(&mu);
    int rc = load_locked();
    pthread_mutex_unlock(&mu);
    return rc;
}

int plx__config_open(const struct plx_comm_options *opt, struct plx_config **out)
{
    *out = NULL;
    struct plx_config *v = calloc(1, sizeof *v);
    if (!v)
        return plx__err(PLX_ERR_NOMEM, "config: out of memory");
    v->refs = 1;
    pthread_mutex_lock(&mu);
    int rc = load_locked();
    if (rc == 0 && opt)
        rc = apply_options(opt, v);
    pthread_mutex_unlock(&mu);
    if (rc) {
        view_free(v);
        return rc;
    }
    *out = v;
    return 0;
}

struct plx_config *plx__config_retain(struct plx_config *v)
{
    if (v)
        __atomic_add_fetch(&v->refs, 1, __ATOMIC_RELAXED);
    return v;
}

void plx__config_release(struct plx_config *v)
{
    if (v && __atomic_sub_fetch(&v->refs, 1, __ATOMIC_ACQ_REL) == 0)
        view_free(v);
}

void plx__config_set_section(struct plx_config *v, const char *section)
{
    if (v && !v->section)
        v->section = strdup(section);
}

const char *plx__config_section(const struct plx_config *v, const char *fallback)
{
    return v && v->section ? v->section : fallback;
}

int plx__config_derive(const struct plx_config *v, const char *section, struct plx_config **out)
{
    *out = NULL;
    struct plx_config *d = calloc(1, sizeof *d);
    if (!d)
        return plx__err(PLX_ERR_NOMEM, "config: out of memory");
    d->refs = 1;
    int rc = 0;
    for (size_t i = 0; v && i < v->n && rc == 0; i++)
        rc = view_set(d, v->items[i].section, v->items[i].key, v->items[i].value, v->items[i].origin);
    if (rc == 0 && !(d->section = strdup(section)))
        rc = plx__err(PLX_ERR_NOMEM, "config: out of memory");
    if (rc) {
        view_free(d);
        return rc;
    }
    *out = d;
    return 0;
}

int plx__config_declare(const char *section, const struct plx_key *keys)
{
    pthread_mutex_lock(&mu);
    struct declared *nd = realloc(declared, (n_declared + 1) * sizeof *nd);
    if (!nd) {
        pthread_mutex_unlock(&mu);
        return plx__err(PLX_ERR_NOMEM, "config: out of memory");
    }
    declared = nd;
    declared[n_declared++] = (struct declared){.section = lower_dup(section), .keys = keys};
    /* The values the files and variables gave this section, checked now;
     * the first bad one, by its origin, is the error. */
    int rc = 0;
    for (size_t i = 0; i < n_entries && rc == 0; i++) {
        char msg[384];
        if (strcasecmp(entries[i].section, section) || !entries[i].value)
            continue;
        if (validate(entries[i].section, entries[i].key, entries[i].value, msg, sizeof msg) != 0)
            rc = plx__err(PLX_ERR_CONFIG, "%s: %s", entries[i].origin, msg);
    }
    for (const struct plx_key *k = keys; rc == 0 && k->key; k++)
        if (k->default_value && !find(section, k->key))
            rc = set_value(section, k->key, k->default_value, "default");
    pthread_mutex_unlock(&mu);
    return rc;
}

int plx__config_check_view(const struct plx_config *v, const char *section)
{
    pthread_mutex_lock(&mu);
    int rc = 0;
    for (size_t i = 0; v && i < v->n && rc == 0; i++) {
        char msg[384];
        if (strcasecmp(v->items[i].section, section))
            continue;
        if (validate(v->items[i].section, v->items[i].key, v->items[i].value, msg, sizeof msg) != 0)
        {
            const struct entry *e = &v->items[i];
            if (!strcmp(e->origin, "option"))
                rc = plx__err(PLX_ERR_CONFIG, "option '%s.%s=%s': %s", e->section, e->key, e->value, msg);
            else
                rc = plx__err(PLX_ERR_CONFIG, "%s: %s", e->origin, msg);
        }
    }
    pthread_mutex_unlock(&mu);
    return rc;
}

const char *plx__config_get_in(const struct plx_config *v, const char *section, const char *key,
                               const char **origin)
{
    const struct entry *e = view_find(v, section, key); /* a view never changes */
    if (e) {
        if (origin)
            *origin = e->origin;
        return e->value;
    }
    /* The process table may grow (and move) under another thread: read the
     * strings, which live as long as the process, while holding the lock. */
    pthread_mutex_lock(&mu);
    e = find(section, key);
    const char *value = e ? e->value : NULL;
    if (origin)
        *origin = value ? e->origin : NULL;
    pthread_mutex_unlock(&mu);
    return value;
}

int plx__config_number_in(const struct plx_config *v, const char *section, const char *key, int64_t *out)
{
    const char *def, *choices, *origin;
    pthread_mutex_lock(&mu);
    int type = type_of(section, key, &def, &choices);
    pthread_mutex_unlock(&mu);
    const char *s = plx__config_get_in(v, section, key, &origin);
    if (!s && !def)
        return PLX_ERR_NOT_FOUND;
    if (type == PLX_KEY_STRING) /* undeclared (a plugin older than ABI 1.3): read as an integer */
        type = PLX_KEY_INT;
    char msg[384];
    if (plx__key_check(section, key, type, choices, s ? s : def, msg, sizeof msg) != 0)
        return plx__err(PLX_ERR_CONFIG, "%s: %s", s ? origin : "default", msg);
    *out = plx__key_number(key, type, s ? s : def);
    return 0;
}

int plx__config_int_in(const struct plx_config *view, const char *section, const char *key, int64_t def,
                       int64_t *out)
{
    *out = def;
    int64_t v;
    int rc = plx__config_number_in(view, section, key, &v);
    if (rc == 0)
        *out = v;
    return rc == PLX_ERR_NOT_FOUND ? 0 : rc;
}

int plx__config_ms_in(const struct plx_config *v, const char *section, const char *key, int64_t *ms)
{
    int64_t ns = 0;
    int rc = plx__config_number_in(v, section, key, &ns);
    if (rc == 0)
        *ms = ns / 1000000;
    return rc;
}

int plx__config_bool_in(const struct plx_config *view, const char *section, const char *key, int def, int *out)
{
    *out = def;
    const char *origin, *s = plx__config_get_in(view, section, key, &origin);
    if (!s)
        return 0;
    char msg[384];
    if (plx__key_check(section, key, PLX_KEY_BOOL, NULL, s, msg, sizeof msg) != 0)
        return plx__err(PLX_ERR_CONFIG, "%s: %s", origin, msg);
    *out = (int)plx__key_number(key, PLX_KEY_BOOL, s);
    return 0;
}

size_t plx__config_dropin_count(void)
{
    return n_dropins;
}

const struct plx__dropin *plx__config_dropin(size_t i)
{
    return i < n_dropins ? &dropins[i] : NULL;
}

size_t plx__config_entry_count(const struct plx_config *v)
{
    size_t n = n_entries;
    for (size_t i = 0; v && i < v->n; i++)
        n += !find(v->items[i].section, v->items[i].key);
    return n;
}

int plx__config_entry_at(const struct plx_config *v, size_t i, struct plx__config_entry *out)
{
    const struct entry *e = NULL;
    if (i < n_entries) {
        e = view_find(v, entries[i].section, entries[i].key);
        if (!e)
            e = &entries[i];
    } else {
        /* The view's keys the process layers do not have, in order. */
        size_t k = n_entries;
        for (size_t j = 0; v && j < v->n && !e; j++)
            if (!find(v->items[j].section, v->items[j].key) && k++ == i)
                e = &v->items[j];
    }
    if (!e)
        return PLX_ERR_INVALID_ARG;
    const struct plx__key *k = plx__key_find(e->section, e->key);
    int known;
    const struct plx_key *d = k ? NULL : declared_key(e->section, e->key, &known);
    out->section = e->section;
    out->key = e->key;
    out->value = e->value;
    out->origin = e->origin;
    out->help = k ? k->help : d && d->help ? d->help : "";
    out->type = plx__key_type_name(type_of(e->section, e->key, NULL, NULL));
    return 0;
}

void plx__config_reset(void)
{
    pthread_mutex_lock(&mu);
    n_entries = 0; /* strings are leaked on purpose: plugins may still hold them */
    n_dropins = 0;
    loaded = 0;
    n_declared = 0; /* the plugins' key tables are static: nothing to free */
    pthread_mutex_unlock(&mu);
}
