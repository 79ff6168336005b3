/* fuzz_config.c - the INI configuration (core/config.c) fed as the files,
 * variables and options a user would write, through plx__config_open.
 *
 * The input is up to five parts separated by NUL bytes:
 *   0  DIR/plexus.ini
 *   1  DIR/backends.d/fz.ini (a drop-in)
 *   2  lines NAME=VALUE, each set as the variable PLEXUS_NAME
 *   3  a file passed as plx_comm_options.config_file
 *   4  lines passed as plx_comm_options.overrides
 * DIR is the only folder on PLEXUS_CONFIG_PATH, so nothing outside the
 * input is read.
 *
 * Checks beyond "no crash": a failed load returns PLX_ERR_CONFIG (or
 * NOMEM) with a message that names where the bad text came from (a file
 * under DIR, a variable, an option); a successful load leaves every entry
 * readable, and every [core] int/bool key that passed validation also reads
 * through the typed getter without an error.
 *
 * The config never frees the strings it hands out (plugins keep them), so a
 * long run grows by what each input adds; that is by design, not a leak.
 * A communicator's options (parts 3 and 4) are its own view, freed with it. */
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "config_keys.h"
#include "error.h"
#include "fuzz_check.h"

static char dir[PATH_MAX];
static char ini[PATH_MAX + 32], dropin[PATH_MAX + 32], optfile[PATH_MAX + 32], dropdir[PATH_MAX + 32];

static void cleanup(void)
{
    unlink(ini);
    unlink(dropin);
    unlink(optfile);
    rmdir(dropdir);
    rmdir(dir);
}

static void setup(void)
{
    if (dir[0])
        return;
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/plexus-fuzz-config-XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
    FUZZ_CHECK(mkdtemp(dir));
    snprintf(ini, sizeof ini, "%s/plexus.ini", dir);
    snprintf(dropdir, sizeof dropdir, "%s/backends.d", dir);
    snprintf(dropin, sizeof dropin, "%s/backends.d/fz.ini", dir);
    snprintf(optfile, sizeof optfile, "%s/options.ini", dir);
    FUZZ_CHECK(mkdir(dropdir, 0700) == 0);
    atexit(cleanup);
    setenv("PLEXUS_CONFIG_PATH", dir, 1);
    unsetenv("PLEXUS_CONFIG");
    unsetenv("PLEXUS_BACKEND");
}

static void write_file(const char *path, const uint8_t *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    FUZZ_CHECK(f);
    FUZZ_CHECK(fwrite(p, 1, n, f) == n);
    FUZZ_CHECK(fclose(f) == 0);
}

/* Splits [p, end) at the first NUL: returns the part's length, advances *p. */
static size_t next_part(const uint8_t **p, const uint8_t *end, const uint8_t **part)
{
    *part = *p;
    const uint8_t *z = *p < end ? memchr(*p, 0, (size_t)(end - *p)) : NULL;
    size_t n = (size_t)((z ? z : end) - *p);
    *p = z ? z + 1 : end;
    return n;
}

/* Copies the lines of text[0..n) into a NULL-terminated array of strings. */
static char **lines_of(const uint8_t *text, size_t n, size_t max)
{
    char **v = calloc(max + 1, sizeof *v);
    FUZZ_CHECK(v);
    size_t k = 0;
    for (size_t i = 0; i < n && k < max;) {
        const uint8_t *nl = memchr(text + i, '\n', n - i);
        size_t len = nl ? (size_t)(nl - (text + i)) : n - i;
        FUZZ_CHECK(v[k] = strndup((const char *)text + i, len));
        k++;
        i += len + 1;
    }
    return v;
}

static void free_lines(char **v)
{
    for (char **s = v; s && *s; s++)
        free(*s);
    free(v);
}

/* The variables named by part 2: set before the load; returns their names
 * so they can be unset after it. */
static char **set_env(const uint8_t *text, size_t n)
{
    char **lines = lines_of(text, n, 16), **names = calloc(17, sizeof *names);
    FUZZ_CHECK(names);
    size_t k = 0;
    for (char **l = lines; *l; l++) {
        char *eq = strchr(*l, '=');
        if (!eq)
            continue;
        char name[300];
        snprintf(name, sizeof name, "PLEXUS_%.*s", (int)(eq - *l), *l);
        /* The variables that steer this harness stay ours. */
        if (!strcmp(name, "PLEXUS_CONFIG_PATH") || !strcmp(name, "PLEXUS_CONFIG"))
            continue;
        setenv(name, eq + 1, 1);
        FUZZ_CHECK(names[k++] = strdup(name));
    }
    free_lines(lines);
    return names;
}

static void unset_env(char **names)
{
    for (char **l = names; *l; l++)
        unsetenv(*l);
    free_lines(names);
}

static void check_loaded(const struct plx_config *view)
{
    size_t n = plx__config_entry_count(view);
    for (size_t i = 0; i < n; i++) {
        struct plx__config_entry e;
        FUZZ_CHECK(plx__config_entry_at(view, i, &e) == 0);
        const char *section = e.section, *key = e.key, *value = e.value, *origin = e.origin;
        FUZZ_CHECK(section && key && e.help && e.type);
        if (!value)
            continue;
        FUZZ_CHECK(origin && origin[0]);
        const struct plx__key *k = plx__key_find(section, key);
        if (!k || strcmp(k->section, "core"))
            continue;
        /* Validated at load time, so the typed getters must accept it. */
        if (k->type == PLX_KEY_UINT || k->type == PLX_KEY_SIZE || k->type == PLX_KEY_DURATION) {
            int64_t v;
            FUZZ_CHECK(plx__config_int_in(view, section, key, 0, &v) == 0 && v >= 0);
        } else if (k->type == PLX_KEY_BOOL) {
            int b;
            FUZZ_CHECK(plx__config_bool_in(view, section, key, 0, &b) == 0);
        }
    }
    for (size_t i = 0; i < plx__config_dropin_count(); i++) {
        const struct plx__dropin *d = plx__config_dropin(i);
        FUZZ_CHECK(d && d->section && d->file && (d->library || d->alias));
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    setup();
    const uint8_t *p = data, *end = data + size, *part[5];
    size_t len[5];
    for (int i = 0; i < 5; i++)
        len[i] = next_part(&p, end, &part[i]);

    write_file(ini, part[0], len[0]);
    if (len[1])
        write_file(dropin, part[1], len[1]);
    else
        unlink(dropin);
    char **env = set_env(part[2], len[2]);
    struct plx_comm_options opt = {.struct_size = sizeof opt};
    if (len[3]) {
        write_file(optfile, part[3], len[3]);
        opt.config_file = optfile;
    }
    char **overrides = lines_of(part[4], len[4], 8);
    opt.overrides = (const char *const *)overrides;

    plx__err_clear();
    plx__config_reset();
    struct plx_config *view = NULL;
    int rc = plx__config_open(&opt, &view);
    if (rc == 0) {
        check_loaded(view);
        plx__config_release(view);
    } else {
        FUZZ_CHECK(rc == PLX_ERR_CONFIG || rc == PLX_ERR_NOMEM);
        const char *e = plx_last_error();
        FUZZ_CHECK(e && e[0]);
        /* It names the file, variable or option the bad text came from. */
        FUZZ_CHECK(strstr(e, dir) || !strncmp(e, "environment PLEXUS_", 19) || !strncmp(e, "option '", 8));
    }
    unset_env(env);
    free_lines(overrides);
    return 0;
}
