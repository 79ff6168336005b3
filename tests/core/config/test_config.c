/* test_config.c - per-communicator options, typed keys and their errors.
 *
 *   test_config SIM_SO TCP_SO
 *
 * 1. Two jobs of two sim ranks each, started by threads at the same time,
 *    each with its own options: every communicator, and its split made after
 *    the other job's communicators exist, sees its own values.
 * 2. Typed keys: a bad value in a file, a variable or an option is refused
 *    with where it came from (file:line); the same for a backend's own keys
 *    (declared by the plugin, checked by the core when it loads).
 * 3. backend = ,,, is refused (file, variable, API), not read as auto.
 * 4. plx_config_entry fills a caller's older, smaller struct.
 * 5. An alias drop-in ([name] alias = a, b) stands for the first usable
 *    backend of its list, under its own name and section. */
#include <limits.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "comm.h"
#include "config.h"
#include "loader.h"
#include "plexus/info.h"
#include "ranks.h"

static int failures;
static char root[PATH_MAX];
static const char *sim_so, *tcp_so;

/* ---- 1. per-communicator options ---------------------------------------- */

struct expect {
    size_t small_bytes;
    int native;
};

static pthread_barrier_t all_created;

static int check_comm(struct plx_comm *c, const struct expect *x, const char *what)
{
    int before = failures;
    if (c->tuning.small_bytes != x->small_bytes || ((c->caps.collectives & PLX_BIT(PLX_COLL_ALLREDUCE)) != 0) != x->native)
        fprintf(stderr, "%s rank %d: small_bytes %zu native %d, want %zu and %d\n", what, c->rank,
                c->tuning.small_bytes, (c->caps.collectives & PLX_BIT(PLX_COLL_ALLREDUCE)) != 0, x->small_bytes,
                x->native);
    CHECK(c->tuning.small_bytes == x->small_bytes);
    CHECK(((c->caps.collectives & PLX_BIT(PLX_COLL_ALLREDUCE)) != 0) == x->native);
    return failures != before;
}

static int job_rank(struct rank_ctx *ctx, int rc)
{
    const struct expect *x = ctx->arg;
    CHECK(rc == 0);
    /* Both jobs' communicators exist before either splits. */
    pthread_barrier_wait(&all_created);
    if (rc)
        return 1;
    check_comm(ctx->comm, x, "comm");
    struct plx_comm *child = NULL;
    CHECK(plx_comm_split(ctx->comm, 0, ctx->rank, &child) == 0);
    if (child) {
        check_comm(child, x, "split");
        float v = 1;
        CHECK(plx_allreduce(child, &v, &v, 1, PLX_F32, PLX_SUM) == 0 && v == 2);
        plx_comm_destroy(child);
    }
    return 0;
}

struct job {
    const char *const *overrides;
    struct expect x;
};

static void *job_main(void *p)
{
    struct job *j = p;
    run_ranks(2, "sim", j->overrides, 20000, job_rank, &j->x);
    return NULL;
}

static void test_per_comm(void)
{
    /* "off" is false in the one boolean vocabulary. */
    static const char *const a[] = {"core.small_bytes=1K", "sim.native_collectives=off", NULL};
    static const char *const b[] = {"core.small_bytes=2048", NULL};
    struct job jobs[2] = {{a, {1024, 0}}, {b, {2048, 1}}};
    pthread_barrier_init(&all_created, NULL, 4);
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&t[i], NULL, job_main, &jobs[i]);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    pthread_barrier_destroy(&all_created);
}

/* ---- 2. and 3. typed keys and their errors --------------------------------- */

static void write_bytes(const char *rel, const char *data, size_t n)
{
    char path[PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/%s", root, rel);
    FILE *f = fopen(path, "w");
    if (!f) {
        perror(path);
        exit(1);
    }
    fwrite(data, 1, n, f);
    fclose(f);
}

static void write_file(const char *rel, const char *text)
{
    write_bytes(rel, text, strlen(text));
}

static void fresh(void)
{
    setenv("PLEXUS_CONFIG_PATH", root, 1);
    plx__config_reset();
    plx__loader_reset();
}

/* A file with NUL bytes (one named by mistake: compressed, binary) is not
 * read as blank lines or lines cut short at the NUL. */
static void test_not_text(void)
{
    static const char cut[] = "[core]\ntimeout_ms = 5s\0junk\n", gz[] = "\x1f\x8b\x08\0\0\0\0\0\0\x03\n[core]\n";
    char want[PATH_MAX * 2];
    write_bytes("plexus.ini", cut, sizeof cut - 1);
    fresh();
    CHECK(plx__config_load() == PLX_ERR_CONFIG);
    snprintf(want, sizeof want, "%s/plexus.ini:2: a NUL byte: not a text file", root);
    CHECK_STR(plx_last_error(), want);
    write_bytes("plexus.ini", gz, sizeof gz - 1);
    fresh();
    CHECK(plx__config_load() == PLX_ERR_CONFIG);
    snprintf(want, sizeof want, "%s/plexus.ini:1: a NUL byte: not a text file", root);
    CHECK_STR(plx_last_error(), want);
}

static void expect_load_error(const char *ini, const char *want_fmt)
{
    char want[PATH_MAX * 2];
    write_file("plexus.ini", ini);
    fresh();
    CHECK(plx__config_load() == PLX_ERR_CONFIG);
    snprintf(want, sizeof want, want_fmt, root);
    CHECK_STR(plx_last_error(), want);
}

static void test_typed(void)
{
    char want[PATH_MAX * 2], ini[PATH_MAX * 2];
    expect_load_error("[core]\nsmall_bytes = 12Q\n",
                      "%s/plexus.ini:2: core.small_bytes = '12Q' is not a size (bytes, or with K, M, G)");
    expect_load_error("[core]\ncuda_staging = maybe\n",
                      "%s/plexus.ini:2: core.cuda_staging = 'maybe' is not a boolean (true or false)");
    expect_load_error("# the empty list\n[core]\nbackend = ,,,\n",
                      "%s/plexus.ini:3: core.backend = ',,,' has an empty item: expected a comma-separated list of names");
    expect_load_error("[core]\nbackend = tcp,,sim\n",
                      "%s/plexus.ini:2: core.backend = 'tcp,,sim' has an empty item: expected a comma-separated list of names");

    /* Sizes and durations read as bytes and nanoseconds. */
    write_file("plexus.ini", "[core]\nsmall_bytes = 2M\nauth_timeout_ms = 3s\n");
    fresh();
    CHECK(plx__config_load() == 0);
    int64_t v = 0;
    CHECK(plx__config_number_in(NULL, "core", "small_bytes", &v) == 0 && v == 2 << 20);
    CHECK(plx__config_number_in(NULL, "core", "auth_timeout_ms", &v) == 0 && v == 3000000000);

    /* The variable PLEXUS_BACKEND and the API are held to the same rule. */
    write_file("plexus.ini", "[core]\n");
    fresh();
    setenv("PLEXUS_BACKEND", ",,,", 1);
    CHECK(plx__config_load() == PLX_ERR_CONFIG);
    CHECK_STR(plx_last_error(), "environment PLEXUS_BACKEND: core.backend = ',,,' has an empty item: expected a "
                                "comma-separated list of names");
    unsetenv("PLEXUS_BACKEND");
    fresh();
    struct plx_comm_options o;
    plx_comm_options_init(&o);
    o.backend = ",,,";
    o.rank = 0;
    o.size = 1;
    o.init = "mem://typed";
    struct plx_comm *c = NULL;
    CHECK(plx_comm_init(&o, &c) == PLX_ERR_CONFIG && c == NULL);
    CHECK(strstr(plx_last_error(), "core.backend = ',,,' has an empty item") != NULL);

    /* A backend's own keys: declared by the plugin, checked by the core at
     * load time with the file and line; the backend is then broken. */
    mkdir(strcat(strcpy(ini, root), "/backends.d"), 0755);
    snprintf(ini, sizeof ini, "[tcp]\nlibrary = %s\npriority = 50\nbusy_poll_us = fast\n", tcp_so);
    write_file("backends.d/50-tcp.ini", ini);
    snprintf(ini, sizeof ini, "[sim]\nlibrary = %s\nnative_colectives = false\n", sim_so);
    write_file("backends.d/10-sim.ini", ini);
    fresh();
    CHECK(plx__config_load() == 0 && plx__loader_discover() == 0);
    struct plx__backend *b = plx__loader_find("tcp");
    CHECK(b && b->state == PLX_STATE_BROKEN);
    snprintf(want, sizeof want, "%s/backends.d/50-tcp.ini:4: tcp.busy_poll_us = 'fast' is not a duration (a number "
             "with ns, us, ms, s, m or h) or auto", root);
    if (b)
        CHECK_STR(b->reason, want);
    b = plx__loader_find("sim");
    CHECK(b && b->state == PLX_STATE_BROKEN);
    snprintf(want, sizeof want, "%s/backends.d/10-sim.ini:3: unknown key 'native_colectives' in [sim] (did you mean "
             "'native_collectives'?)", root);
    if (b)
        CHECK_STR(b->reason, want);

    /* An option with a value outside a plugin key's choices. */
    snprintf(ini, sizeof ini, "[sim]\nlibrary = %s\n", sim_so);
    write_file("backends.d/10-sim.ini", ini);
    fresh();
    static const char *const bad[] = {"sim.fail_op=allreduse", NULL};
    o.backend = "sim";
    o.overrides = bad;
    CHECK(plx_comm_init(&o, &c) == PLX_ERR_CONFIG && c == NULL);
    CHECK_STR(plx_last_error(), "option 'sim.fail_op=allreduse': sim.fail_op = 'allreduse' is not one of "
              "allreduce|broadcast|reduce|allgather|reduce_scatter|gather|scatter|alltoall|barrier|send|recv|any");
    unlink(strcat(strcpy(ini, root), "/backends.d/10-sim.ini"));
    unlink(strcat(strcpy(ini, root), "/backends.d/50-tcp.ini"));
    rmdir(strcat(strcpy(ini, root), "/backends.d"));
}

/* ---- 4. plx_config_entry and an older caller ---------------------------- */

static void test_entry_sizes(void)
{
    write_file("plexus.ini", "[core]\n");
    fresh();
    CHECK(plx_backends_discover(NULL) == 0 && plx_config_count() > 0);
    /* The first version of the struct ended after help. */
    struct plx_config_entry e;
    memset(&e, 0xab, sizeof e);
    e.struct_size = (uint32_t)(offsetof(struct plx_config_entry, help) + sizeof e.help);
    CHECK(plx_config_entry(0, &e) == 0);
    CHECK(e.section && e.key && e.origin && e.help);
    unsigned char tail[sizeof e.type];
    memset(tail, 0xab, sizeof tail);
    CHECK(memcmp(&e.type, tail, sizeof tail) == 0); /* not written: it is not the caller's */
    struct plx_config_entry full = {.struct_size = sizeof full};
    CHECK(plx_config_entry(0, &full) == 0 && full.type && !strcmp(full.type, "list"));
    e.struct_size = 8;
    CHECK(plx_config_entry(0, &e) == PLX_ERR_INVALID_ARG);
}

/* ---- 5. aliases ------------------------------------------------------------ */

static int alias_rank(struct rank_ctx *ctx, int rc)
{
    CHECK(rc == 0);
    if (rc)
        return 1;
    CHECK(!strcmp(plx_comm_backend(ctx->comm), "both"));
    /* The alias reads its own section: [both] native_collectives = false. */
    CHECK((ctx->comm->caps.collectives & PLX_BIT(PLX_COLL_ALLREDUCE)) == 0);
    float v = 1;
    CHECK(plx_allreduce(ctx->comm, &v, &v, 1, PLX_F32, PLX_SUM) == 0 && v == 2);
    return 0;
}

static void test_alias(void)
{
    char ini[PATH_MAX * 2];
    mkdir(strcat(strcpy(ini, root), "/backends.d"), 0755);
    snprintf(ini, sizeof ini, "[sim]\nlibrary = %s\n", sim_so);
    write_file("backends.d/10-sim.ini", ini);
    write_file("backends.d/20-both.ini", "[both]\nalias = nosuch, sim\nnative_collectives = false\n");
    write_file("backends.d/30-none.ini", "[none]\nalias = sim\nenabled = true\n");
    write_file("backends.d/31-none.ini", "[sim]\nenabled = false\n[none]\nalias_reason = no simulator today\n");
    fresh();
    CHECK(plx__config_load() == 0 && plx__loader_discover() == 0);
    /* sim is disabled by 31-none.ini: neither alias has a usable target. */
    struct plx__backend *b = plx__loader_find("none");
    CHECK(b && b->state == PLX_STATE_UNAVAILABLE);
    if (b)
        CHECK(strstr(b->reason, "no simulator today (sim: disabled: disabled by ") == b->reason);
    b = plx__loader_find("both");
    CHECK(b && b->state == PLX_STATE_UNAVAILABLE);
    if (b)
        CHECK(strstr(b->reason, "none of nosuch, sim is usable here (nosuch: no such backend; sim: disabled") == b->reason);

    unlink(strcat(strcpy(ini, root), "/backends.d/31-none.ini"));
    fresh();
    CHECK(plx__config_load() == 0 && plx__loader_discover() == 0);
    b = plx__loader_find("both");
    CHECK(b && b->state == PLX_STATE_USABLE && b->target == plx__loader_find("sim"));
    if (b)
        CHECK(strstr(b->ops.description, "alias of sim here: ") == b->ops.description);
    run_ranks(2, "both", NULL, 20000, alias_rank, NULL);
    const char *files[] = {"10-sim.ini", "20-both.ini", "30-none.ini"};
    for (int i = 0; i < 3; i++) {
        snprintf(ini, sizeof ini, "%s/backends.d/%s", root, files[i]);
        unlink(ini);
    }
    rmdir(strcat(strcpy(ini, root), "/backends.d"));
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: test_config SIM_SO TCP_SO\n");
        return 2;
    }
    sim_so = argv[1];
    tcp_so = argv[2];
    test_per_comm();
    const char *tmp = getenv("TMPDIR");
    snprintf(root, sizeof root, "%s/plexus-test-config-XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
    if (!mkdtemp(root)) {
        perror("mkdtemp");
        return 1;
    }
    test_typed();
    test_not_text();
    test_entry_sizes();
    test_alias();
    unlink(strcat(root, "/plexus.ini"));
    *strrchr(root, '/') = '\0';
    rmdir(root);
    if (failures)
        fprintf(stderr, "%d check(s) failed\n", failures);
    else
        printf("config checks passed\n");
    return failures != 0;
}
