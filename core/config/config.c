/* config.c - layered configuration: defaults, INI files and drop-ins (inih),
 * PLEXUS_<SECTION>_<KEY> variables, API options; each value keeps its origin.
 *
 * Debian's libinih is built without INI_HANDLER_LINENO, so line numbers come
 * from our own line reader passed to ini_parse_stream (inih asks it for one
 * line at a time), which also keeps the text of each line for messages. */
#include "config.h"

#include <ctype.h>
#include <dirent.h>
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
    const char *value, *origin;         /* files, env (never freed: plugins keep pointers) */
    const char *opt_value, *opt_origin; /* the API options layer, replaced per load */
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct entry *entries;
static size_t n_entries, cap_entries;
static struct plx__dropin *dropins;
static size_t n_dropins;
static int loaded;
static char *options_signature; /* the options applied last, to skip re-applying */

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

static const char *effective(const struct entry *e)
{
    return e->opt_value ? e->opt_value : e->value;
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
        }
    return d[la][lb];
}

/* Check value against the table; fills msg on error. */
static int validate(const char *section, const char *key, const char *value, char *msg, size_t len)
{
    const struct plx__key *k = plx__key_find(section, key);
    if (!k) {
        if (strcasecmp(section, "core"))
            return 0; /* a backend's own key: the plugin validates it */
        const char *best = NULL;
        int bd = 99;
        for (size_t i = 0; i < plx__nkeys; i++) {
            int d = strcmp(plx__keys[i].section, "core") ? 99 : plx__edit_distance(key, plx__keys[i].key);
            if (d < bd) {
                bd = d;
                best = plx__keys[i].key;
            }
        }
        if (best && bd <= 3)
            snprintf(msg, len, "unknown key '%s' in [core] (did you mean '%s'?)", key, best);
        else
            snprintf(msg, len, "unknown key '%s' in [core]", key);
        return -1;
    }
    char *end;
    switch (k->type) {
    case PLX__KEY_INT:
        errno = 0;
        long long v = strtoll(value, &end, 10);
        if (!*value || *end || errno || v < 0) {
            snprintf(msg, len, "%s.%s = '%s' is not a non-negative integer", section, key, value);
            return -1;
        }
        return 0;
    case PLX__KEY_BOOL:
        if (!strcasecmp(value, "true") || !strcasecmp(value, "false") || !strcmp(value, "1") ||
            !strcmp(value, "0") || !strcasecmp(value, "yes") || !strcasecmp(value, "no"))
            return 0;
        snprintf(msg, len, "%s.%s = '%s' is not a boolean (true or false)", section, key, value);
        return -1;
    case PLX__KEY_ENUM: {
        size_t n = strlen(value);
        for (const char *c = k->choices; c && *c;) {
            const char *bar = strchr(c, '|');
            size_t m = bar ? (size_t)(bar - c) : strlen(c);
            if (m == n && !strncasecmp(c, value, n))
                return 0;
            c = bar ? bar + 1 : NULL;
        }
        snprintf(msg, len, "%s.%s = '%s' is not one of %s", section, key, value, k->choices);
        return -1;
    }
    default:
        return 0;
    }
}

/* ---- INI files ---------------------------------------------------------- */

struct parse {
    const char *file;
    char dir[PATH_MAX];
    FILE *f;
    int line;
    char text[1024];   /* the current line */
    char err[512];     /* first error of our own */
    int err_line;
    int too_long;
};

/* inih's reader: one physical line per call, counted. */
static char *read_line(char *str, int num, void *stream)
{
    struct parse *p = stream;
    if (!fgets(p->text, sizeof p->text, p->f))
        return NULL;
    p->line++;
    size_t n = strlen(p->text);
    if (n == sizeof p->text - 1 && p->text[n - 1] != '\n') {
        int c; /* swallow the rest of an overlong line */
        while ((c = fgetc(p->f)) != EOF && c != '\n')
            ;
    }
    if (n >= (size_t)num - 1 && !(n == (size_t)num - 1 && p->text[n - 1] == '\n')) {
        if (!p->err[0]) {
            snprintf(p->err, sizeof p->err, "%s:%d: line longer than %d characters", p->file, p->line, num - 2);
            p->err_line = p->line;
        }
        p->too_long = 1;
        str[0] = '\0';
        return str;
    }
    memcpy(str, p->text, n + 1);
    return str;
}

static void set_dropin(const char *section, const char *file, int line, const char *dir, const char *lib)
{
    char path[PATH_MAX];
    if (lib[0] == '/')
        snprintf(path, sizeof path, "%s", lib);
    else
        snprintf(path, sizeof path, "%s/%s", dir, lib);
    for (size_t i = 0; i < n_dropins; i++)
        if (!strcasecmp(dropins[i].section, section)) {
            dropins[i].file = kept_strdup(file);
            dropins[i].line = line;
            dropins[i].library = kept_strdup(path);
            return;
        }
    struct plx__dropin *nd = realloc(dropins, (n_dropins + 1) * sizeof *nd);
    if (!nd)
        return;
    dropins = nd;
    dropins[n_dropins++] = (struct plx__dropin){
        .section = lower_dup(section), .file = kept_strdup(file), .line = line, .library = kept_strdup(path),
        .priority = 50, .enabled = 1,
    };
}

static int set_value(const char *section, const char *key, const char *value, const char *origin, int option)
{
    struct entry *e = upsert(section, key);
    if (!e)
        return plx__err(PLX_ERR_NOMEM, "config: out of memory");
    if (option) {
        e->opt_value = kept_strdup(value);
        e->opt_origin = kept_strdup(origin);
    } else {
        e->value = kept_strdup(value);
        e->origin = kept_strdup(origin);
    }
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
    set_value(section, key, value, origin, 0);
    if (!strcasecmp(key, "library") && strcasecmp(section, "core"))
        set_dropin(section, p->file, p->line, p->dir, value);
    return 1;
}

/* The one place that adapts inih's "nonzero is success" handler result. */
static int parse_file(const char *file)
{
    struct parse p = {.file = file};
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
static int parse_dir(const char *dir)
{
    char path[PATH_MAX];
    int rc;
    snprintf(path, sizeof path, "%s/plexus.ini", dir);
    if (exists(path) && (rc = parse_file(path)) != 0)
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
            rc = parse_file(path);
        free(names[i]);
    }
    free(names);
    return rc;
}

static int parse_path_or_dir(const char *p)
{
    return is_dir(p) ? parse_dir(p) : parse_file(p);
}

/* ---- environment -------------------------------------------------------- */

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
        if (!sect)
            continue;
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
        set_value(sect, lkey, value, origin, 0);
        if (!strcmp(lkey, "library"))
            set_dropin(sect, origin, 0, ".", value);
    }
    free(sections);
    return rc;
}

/* ---- options -------------------------------------------------------------- */

static char *signature_of(const struct plx_comm_options *opt)
{
    size_t n = 2 + (opt && opt->config_file ? strlen(opt->config_file) : 0);
    for (const char *const *o = opt ? opt->overrides : NULL; o && *o; o++)
        n += strlen(*o) + 1;
    char *s = calloc(1, n);
    if (!s)
        return NULL;
    if (opt && opt->config_file)
        strcat(s, opt->config_file);
    strcat(s, "\n");
    for (const char *const *o = opt ? opt->overrides : NULL; o && *o; o++) {
        strcat(s, *o);
        strcat(s, "\n");
    }
    return s;
}

static int apply_options(const struct plx_comm_options *opt)
{
    for (size_t i = 0; i < n_entries; i++)
        entries[i].opt_value = entries[i].opt_origin = NULL; /* old strings stay valid for plugins */
    if (!opt)
        return 0;
    if (opt->config_file) {
        /* Parsed into a scratch copy of the file layer, then moved to the option layer. */
        size_t before = n_entries;
        const char **saved = calloc(n_entries + 1, 2 * sizeof *saved);
        if (!saved)
            return plx__err(PLX_ERR_NOMEM, "config: out of memory");
        for (size_t i = 0; i < before; i++) {
            saved[2 * i] = entries[i].value;
            saved[2 * i + 1] = entries[i].origin;
        }
        int rc = parse_path_or_dir(opt->config_file);
        for (size_t i = 0; i < n_entries; i++) {
            const char *v = entries[i].value, *o = entries[i].origin;
            int changed = i >= before || v != saved[2 * i];
            if (i < before) {
                entries[i].value = saved[2 * i];
                entries[i].origin = saved[2 * i + 1];
            } else {
                entries[i].value = NULL;
                entries[i].origin = NULL;
            }
            if (changed) {
                entries[i].opt_value = v;
                entries[i].opt_origin = o;
            }
        }
        free(saved);
        if (rc)
            return rc;
    }
    for (const char *const *o = opt->overrides; o && *o; o++) {
        const char *dot = strchr(*o, '.'), *eq = strchr(*o, '=');
        if (!dot || !eq || dot > eq || dot == *o || eq == dot + 1)
            return plx__err(PLX_ERR_CONFIG, "option '%s': expected section.key=value", *o);
        char section[128], key[128], msg[384];
        snprintf(section, sizeof section, "%.*s", (int)(dot - *o), *o);
        snprintf(key, sizeof key, "%.*s", (int)(eq - dot - 1), dot + 1);
        if (validate(section, key, eq + 1, msg, sizeof msg) != 0)
            return plx__err(PLX_ERR_CONFIG, "option '%s': %s", *o, msg);
        set_value(section, key, eq + 1, "option", 1);
    }
    return 0;
}

/* ---- loading -------------------------------------------------------------- */

static int load_files_and_env(void)
{
    for (size_t i = 0; i < plx__nkeys; i++)
        if (strcmp(plx__keys[i].section, "*") && plx__keys[i].def)
            set_value(plx__keys[i].section, plx__keys[i].key, plx__keys[i].def, "default", 0);
    int rc = 0;
    const char *path = getenv("PLEXUS_CONFIG_PATH");
    if (path) {
        char *copy = strdup(path), *save = NULL;
        for (char *d = strtok_r(copy, ":", &save); d && rc == 0; d = strtok_r(NULL, ":", &save))
            rc = parse_dir(d);
        free(copy);
    } else {
        char user[PATH_MAX];
        const char *xdg = getenv("XDG_CONFIG_HOME"), *home = getenv("HOME");
        rc = parse_dir(PLEXUS_SYSCONFDIR);
        if (rc == 0 && (xdg || home)) {
            if (xdg && xdg[0])
                snprintf(user, sizeof user, "%s/plexus", xdg);
            else
                snprintf(user, sizeof user, "%s/.config/plexus", home);
            rc = parse_dir(user);
        }
    }
    const char *extra = getenv("PLEXUS_CONFIG");
    if (rc == 0 && extra && extra[0]) {
        if (!exists(extra))
            rc = plx__err(PLX_ERR_CONFIG, "PLEXUS_CONFIG=%s: no such file or folder", extra);
        else
            rc = parse_path_or_dir(extra);
    }
    return rc ? rc : apply_env();
}

int plx__config_load(const struct plx_comm_options *opt)
{
    pthread_mutex_lock(&mu);
    int rc = 0;
    if (!loaded) {
        rc = load_files_and_env();
        if (rc == 0)
            loaded = 1;
    }
    if (rc == 0) {
        char *sig = signature_of(opt);
        if (!options_signature || !sig || strcmp(sig, options_signature)) {
            rc = apply_options(opt);
            free(options_signature);
            options_signature = rc == 0 ? sig : NULL;
            if (rc)
                free(sig);
        } else {
            free(sig);
        }
    }
    /* Drop-in flags follow the effective values. */
    for (size_t i = 0; rc == 0 && i < n_dropins; i++) {
        struct entry *e;
        if ((e = find(dropins[i].section, "priority")) && effective(e))
            dropins[i].priority = atoi(effective(e));
        if ((e = find(dropins[i].section, "enabled")) && effective(e)) {
            const char *v = effective(e);
            dropins[i].enabled = !(!strcasecmp(v, "false") || !strcmp(v, "0") || !strcasecmp(v, "no"));
        }
    }
    pthread_mutex_unlock(&mu);
    return rc;
}

const char *plx__config_get(const char *section, const char *key)
{
    pthread_mutex_lock(&mu);
    struct entry *e = find(section, key);
    const char *v = e ? effective(e) : NULL;
    pthread_mutex_unlock(&mu);
    return v;
}

const char *plx__config_origin(const char *section, const char *key)
{
    pthread_mutex_lock(&mu);
    struct entry *e = find(section, key);
    const char *o = e ? (e->opt_value ? e->opt_origin : e->origin) : NULL;
    pthread_mutex_unlock(&mu);
    return o;
}

int plx__config_get_int(const char *section, const char *key, int64_t def, int64_t *out)
{
    const char *v = plx__config_get(section, key);
    *out = def;
    if (!v)
        return 0;
    char *end;
    long long x = strtoll(v, &end, 10);
    if (!*v || *end)
        return plx__err(PLX_ERR_CONFIG, "%s: %s.%s = '%s' is not an integer", plx__config_origin(section, key),
                        section, key, v);
    *out = x;
    return 0;
}

int plx__config_get_bool(const char *section, const char *key, int def, int *out)
{
    const char *v = plx__config_get(section, key);
    *out = def;
    if (!v)
        return 0;
    if (!strcasecmp(v, "true") || !strcmp(v, "1") || !strcasecmp(v, "yes"))
        *out = 1;
    else if (!strcasecmp(v, "false") || !strcmp(v, "0") || !strcasecmp(v, "no"))
        *out = 0;
    else
        return plx__err(PLX_ERR_CONFIG, "%s: %s.%s = '%s' is not a boolean", plx__config_origin(section, key),
                        section, key, v);
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

size_t plx__config_entry_count(void)
{
    return n_entries;
}

int plx__config_entry_at(size_t i, const char **section, const char **key, const char **value, const char **origin,
                         const char **help)
{
    if (i >= n_entries)
        return PLX_ERR_INVALID_ARG;
    struct entry *e = &entries[i];
    const struct plx__key *k = plx__key_find(e->section, e->key);
    *section = e->section;
    *key = e->key;
    *value = effective(e);
    *origin = e->opt_value ? e->opt_origin : e->origin;
    *help = k ? k->help : "";
    return 0;
}

void plx__config_reset(void)
{
    pthread_mutex_lock(&mu);
    n_entries = 0; /* strings are leaked on purpose: plugins may still hold them */
    n_dropins = 0;
    loaded = 0;
    free(options_signature);
    options_signature = NULL;
    pthread_mutex_unlock(&mu);
}
