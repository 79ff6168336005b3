/* Config and loader bad input: each case asserts the exact message a user
 * sees. argv[1]: folder of the fake plugins; argv[2]: the sim plugin. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "error.h"
#include "loader.h"
#include "check.h"

static int failures;
static char root[PATH_MAX];

static void write_file(const char *rel, const char *text)
{
    char path[PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/%s", root, rel);
    FILE *f = fopen(path, "w");
    if (!f) {
        perror(path);
        exit(1);
    }
    fputs(text, f);
    fclose(f);
}

static void fresh(const char *config_path)
{
    setenv("PLEXUS_CONFIG_PATH", config_path, 1);
    plx__config_reset();
    plx__loader_reset();
}

static void test_ini_errors(void)
{
    char want[PATH_MAX * 2], dir[PATH_MAX + 8];
    snprintf(dir, sizeof dir, "%s/bad1", root);
    mkdir(dir, 0755);

    write_file("bad1/plexus.ini", "[core]\ntimeout_ms = 10\nthis line is bad\n");
    fresh(dir);
    CHECK(plx__config_load() == PLX_ERR_CONFIG);
    snprintf(want, sizeof want, "%s/plexus.ini:3: expected 'key = value': this line is bad", dir);
    CHECK_STR(plx_last_error(), want);

    write_file("bad1/plexus.ini", "[core\ntimeout_ms = 10\n");
    fresh(dir);
    CHECK(plx__config_load() == PLX_ERR_CONFIG);
    snprintf(want, sizeof want, "%s/plexus.ini:1: section header without ']': [core", dir);
    CHECK_STR(plx_last_error(), want);

    write_file("bad1/plexus.ini", "# comment\n[core]\ntimeout = 10\n");
    fresh(dir);
    CHECK(plx__config_load() == PLX_ERR_CONFIG);
    snprintf(want, sizeof want, "%s/plexus.ini:3: unknown key 'timeout' in [core] (did you mean 'timeout_ms'?)", dir);
    CHECK_STR(plx_last_error(), want);

    write_file("bad1/plexus.ini", "[core]\ntimeout_ms = abc\n");
    fresh(dir);
    CHECK(plx__config_load() == PLX_ERR_CONFIG);
    snprintf(want, sizeof want, "%s/plexus.ini:2: core.timeout_ms = 'abc' is not a duration (a number with ns, us, ms, s, m or h)", dir);
    CHECK_STR(plx_last_error(), want);

    write_file("bad1/plexus.ini", "[core]\nallreduce_algo = fast\n");
    fresh(dir);
    CHECK(plx__config_load() == PLX_ERR_CONFIG);
    snprintf(want, sizeof want, "%s/plexus.ini:2: core.allreduce_algo = 'fast' is not one of auto|ring|recdbl|tree|rabenseifner",
             dir);
    CHECK_STR(plx_last_error(), want);

    /* A bad variable names itself. */
    write_file("bad1/plexus.ini", "[core]\n");
    fresh(dir);
    setenv("PLEXUS_CORE_LOG_LEVEL", "loud", 1);
    CHECK(plx__config_load() == PLX_ERR_CONFIG);
    CHECK_STR(plx_last_error(),
              "environment PLEXUS_CORE_LOG_LEVEL: core.log_level = 'loud' is not one of error|warn|info|debug|trace");
    unsetenv("PLEXUS_CORE_LOG_LEVEL");
}

static const char *get_in(const struct plx_config *v, const char *section, const char *key)
{
    return plx__config_get_in(v, section, key, NULL);
}

static const char *origin_in(const struct plx_config *v, const char *section, const char *key)
{
    const char *o = NULL;
    plx__config_get_in(v, section, key, &o);
    return o;
}

static void test_layers(void)
{
    char a[PATH_MAX + 8], b[PATH_MAX + 8], both[2 * PATH_MAX + 20], want[PATH_MAX + 64];
    snprintf(a, sizeof a, "%s/la", root);
    snprintf(b, sizeof b, "%s/lb", root);
    mkdir(a, 0755);
    mkdir(b, 0755);
    write_file("la/plexus.ini", "[core]\ntimeout_ms = 1000\nsmall_bytes = 7\n");
    write_file("lb/plexus.ini", "[core]\n\ntimeout_ms = 2000\n");
    snprintf(both, sizeof both, "%s:%s", a, b);

    fresh(both);
    CHECK(plx__config_load() == 0);
    CHECK_STR(get_in(NULL, "core", "timeout_ms"), "2000");
    snprintf(want, sizeof want, "%s/plexus.ini:3", b);
    CHECK_STR(origin_in(NULL, "core", "timeout_ms"), want);
    CHECK_STR(get_in(NULL, "core", "small_bytes"), "7");
    CHECK_STR(get_in(NULL, "core", "segment_bytes"), "0");
    CHECK_STR(origin_in(NULL, "core", "segment_bytes"), "default");

    setenv("PLEXUS_CORE_TIMEOUT_MS", "3000", 1);
    setenv("PLEXUS_BACKEND", "sim", 1);
    fresh(both);
    CHECK(plx__config_load() == 0);
    CHECK_STR(get_in(NULL, "core", "timeout_ms"), "3000");
    CHECK_STR(origin_in(NULL, "core", "timeout_ms"), "env PLEXUS_CORE_TIMEOUT_MS");
    CHECK_STR(get_in(NULL, "core", "backend"), "sim");

    struct plx_comm_options o;
    plx_comm_options_init(&o);
    const char *ov[] = {"core.timeout_ms=4000", NULL};
    o.overrides = ov;
    struct plx_config *view = NULL;
    CHECK(plx__config_open(&o, &view) == 0);
    CHECK_STR(get_in(view, "core", "timeout_ms"), "4000");
    CHECK_STR(origin_in(view, "core", "timeout_ms"), "option");
    /* Options apply to the view (the communicator) that has them, not to others. */
    CHECK(plx__config_load() == 0);
    CHECK_STR(get_in(NULL, "core", "timeout_ms"), "3000");
    plx__config_release(view);
    const char *bad[] = {"core.timeout_ms", NULL};
    o.overrides = bad;
    CHECK(plx__config_open(&o, &view) == PLX_ERR_CONFIG);
    CHECK_STR(plx_last_error(), "option 'core.timeout_ms': expected section.key=value");
    unsetenv("PLEXUS_CORE_TIMEOUT_MS");
    unsetenv("PLEXUS_BACKEND");
}

static void test_loader(const char *plugdir, const char *sim)
{
    char dir[PATH_MAX + 8], text[PATH_MAX * 2], want[PATH_MAX * 4], lib[PATH_MAX], drop[PATH_MAX + 64];
    snprintf(dir, sizeof dir, "%s/ld", root);
    mkdir(dir, 0755);
    snprintf(text, sizeof text, "%s/backends.d", dir);
    mkdir(text, 0755);
    write_file("ld/backends.d/20-missing.ini", "[missing]\nlibrary = nothere.so\n");
#define DROPIN(file, section, so)                                                               \
    do {                                                                                        \
        snprintf(text, sizeof text, "[%s]\nlibrary = %s/%s\npriority = 30\n", section, plugdir, so); \
        write_file("ld/backends.d/" file, text);                                                \
    } while (0)
    DROPIN("30-noentry.ini", "noentry", "fake-noentry.so");
    DROPIN("30-v2.ini", "v2", "fake-v2.so");
    DROPIN("30-wrongname.ini", "wrongname", "fake-wrongname.so");
    DROPIN("30-tcp.ini", "tcp", "fake-tcp.so");
    write_file("ld/backends.d/40-garbage.ini", "[garbage]\nlibrary = garbage.so\n");
    write_file("ld/backends.d/garbage.so", "this is not an ELF file\n");
    snprintf(text, sizeof text, "[sim]\nlibrary = %s\npriority = 10\n", sim);
    write_file("ld/backends.d/10-sim.ini", text);

    fresh(dir);
    setenv("PLEXUS_SIM_ABI_MINOR", "0", 1); /* sim presents the older, shorter ABI 1.0 struct */
    CHECK(plx__config_load() == 0);
    CHECK(plx__loader_discover() == 0);
    unsetenv("PLEXUS_SIM_ABI_MINOR");
    CHECK(plx__loader_count() == 7);

    struct plx__backend *b = plx__loader_find("missing");
    CHECK(b && b->state == PLX_STATE_BROKEN);
    snprintf(want, sizeof want, "library %s/backends.d/nothere.so not found (from %s/backends.d/20-missing.ini:2)", dir,
             dir);
    if (b)
        CHECK_STR(b->reason, want);

    b = plx__loader_find("noentry");
    snprintf(lib, sizeof lib, "%s/fake-noentry.so", plugdir);
    snprintf(want, sizeof want, "%s is not a plexus backend: no symbol plx_backend_entry_v1", lib);
    CHECK(b && b->state == PLX_STATE_BROKEN);
    if (b)
        CHECK_STR(b->reason, want);

    b = plx__loader_find("v2");
    snprintf(lib, sizeof lib, "%s/fake-v2.so", plugdir);
    snprintf(want, sizeof want,
             "%s is built for plugin ABI major 2; this plexus supports major 1 (no plx_backend_entry_v1)", lib);
    CHECK(b && b->state == PLX_STATE_BROKEN);
    if (b)
        CHECK_STR(b->reason, want);

    b = plx__loader_find("wrongname");
    snprintf(lib, sizeof lib, "%s/fake-wrongname.so", plugdir);
    snprintf(drop, sizeof drop, "%s/backends.d/30-wrongname.ini:2", dir);
    snprintf(want, sizeof want, "%s declares the name 'other' but its drop-in section is [wrongname] (%s)", lib, drop);
    CHECK(b && b->state == PLX_STATE_BROKEN);
    if (b)
        CHECK_STR(b->reason, want);

    b = plx__loader_find("garbage");
    snprintf(want, sizeof want, "cannot load %s/backends.d/garbage.so: ", dir);
    CHECK(b && b->state == PLX_STATE_BROKEN);
    if (b) {
        CHECK(!strncmp(b->reason, want, strlen(want)));
        CHECK(strstr(b->reason, "(not a shared object, or a dependency is missing?)") != NULL);
    }

    /* Older minor: loads, usable, the fields it lacks read as NULL. */
    b = plx__loader_find("sim");
    CHECK(b && b->state == PLX_STATE_USABLE && b->abi_minor == 0 && b->ops.comm_split == NULL &&
          b->ops.finalize == NULL && b->ops.isend != NULL);

    /* The good one among broken ones still works. */
    b = plx__loader_find("tcp");
    CHECK(b && b->state == PLX_STATE_USABLE);

    struct plx__backend *sel = NULL;
    CHECK(plx__loader_select("tpc", &sel) == PLX_ERR_NOT_FOUND);
    CHECK_STR(plx_last_error(),
              "unknown backend 'tpc' (did you mean 'tcp'?); known: garbage, missing, noentry, tcp, v2, wrongname, sim");
    CHECK(plx__loader_select("noentry", &sel) == PLX_ERR_BROKEN);
    snprintf(lib, sizeof lib, "%s/fake-noentry.so", plugdir);
    snprintf(want, sizeof want, "backend 'noentry' (library %s, drop-in %s/backends.d/30-noentry.ini:2) is broken: "
             "%s is not a plexus backend: no symbol plx_backend_entry_v1", lib, dir, lib);
    CHECK_STR(plx_last_error(), want);
    CHECK(plx__loader_select("auto", &sel) == 0 && sel && !strcmp(sel->name, "tcp"));
    CHECK(plx__loader_select("^tcp", &sel) == 0 && sel && !strcmp(sel->name, "sim"));
    CHECK(plx__loader_select("noentry,sim", &sel) == 0 && sel && !strcmp(sel->name, "sim"));
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: test_loader PLUGIN_DIR SIM_PLUGIN\n");
        return 2;
    }
    snprintf(root, sizeof root, "/tmp/plexus-test-loader-XXXXXX");
    if (!mkdtemp(root)) {
        perror("mkdtemp");
        return 1;
    }
    test_ini_errors();
    test_layers();
    test_loader(argv[1], argv[2]);
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", root);
    if (failures)
        fprintf(stderr, "%d check(s) failed\n", failures);
    return failures ? 1 : 0;
}
