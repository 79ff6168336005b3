/* fuzz_loader.c - the loader's ABI handling (core/loader.c) fed fake plugin
 * descriptors: struct sizes, answered minors, NULL operations and names,
 * failing entry points, get_caps and probe results, all from fuzz bytes
 * (see fake_backend.c). It runs the real path, plx__loader_discover: the
 * drop-in, stat, dlopen, entry point, negotiation, validation, probe.
 *
 * Checks beyond "no crash": a backend that is not broken has every required
 * operation, its drop-in's name and a negotiated minor no newer than ours;
 * no operation the plugin's struct_size does not wholly cover reads as
 * anything but NULL (backend.h: "a reader touches a field only if it lies
 * inside struct_size"); the reason is a string; plx_backend_info writes no
 * more than the caller's struct_size; selection agrees with the state. */
#include <dlfcn.h>
#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "error.h"
#include "fuzz_check.h"
#include "loader.h"
#include "log.h"
#include "plexus/info.h"

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define FUZZ_LSAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define FUZZ_LSAN 1
#endif
#ifdef FUZZ_LSAN
#include <sanitizer/lsan_interface.h>
#else
static void __lsan_disable(void) {}
static void __lsan_enable(void) {}
#endif

#ifndef FUZZ_PLUGIN
#error "FUZZ_PLUGIN: the path of fuzz_fake_backend.so"
#endif

static char dir[PATH_MAX], dropdir[PATH_MAX + 16], dropin[PATH_MAX + 32];
static void (*set_input)(const unsigned char *, size_t);
static uint32_t (*declared_size)(void);

static void cleanup(void)
{
    unlink(dropin);
    rmdir(dropdir);
    rmdir(dir);
}

static void setup(void)
{
    if (set_input)
        return;
    /* The harness's own handle on the plugin: the loader's dlopen of the
     * same path later returns this same copy, so both see one input. */
    void *h = dlopen(FUZZ_PLUGIN, RTLD_NOW | RTLD_LOCAL);
    if (!h)
        fprintf(stderr, "%s\n", dlerror());
    FUZZ_CHECK(h);
    *(void **)&set_input = dlsym(h, "fuzz_fake_backend_input");
    *(void **)&declared_size = dlsym(h, "fuzz_fake_backend_declared_size");
    FUZZ_CHECK(set_input && declared_size);

    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/plexus-fuzz-loader-XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
    FUZZ_CHECK(mkdtemp(dir));
    snprintf(dropdir, sizeof dropdir, "%s/backends.d", dir);
    snprintf(dropin, sizeof dropin, "%s/backends.d/fz.ini", dir);
    FUZZ_CHECK(mkdir(dropdir, 0700) == 0);
    FILE *f = fopen(dropin, "w");
    FUZZ_CHECK(f);
    fprintf(f, "[fz]\nlibrary = %s\npriority = 60\n", FUZZ_PLUGIN);
    FUZZ_CHECK(fclose(f) == 0);
    atexit(cleanup);
    setenv("PLEXUS_CONFIG_PATH", dir, 1);
    unsetenv("PLEXUS_CONFIG");
    unsetenv("PLEXUS_BACKEND");
    plx__config_reset();
    FUZZ_CHECK(plx__config_load() == 0);
    /* Most inputs make a broken backend, which the loader reports at WARN:
     * quiet by default (PLEXUS_CORE_LOG_LEVEL=warn shows them). */
    if (!getenv("PLEXUS_CORE_LOG_LEVEL"))
        plx__log_set_level("error");
}

/* Every operation the core could call, with its offset, so the check below
 * covers whatever the struct holds. */
#define OP(f) {offsetof(struct plx_backend, f), #f}
static const struct {
    size_t off;
    const char *name;
} ops[] = {
    OP(probe), OP(get_caps), OP(op_supported), OP(comm_create), OP(comm_destroy), OP(comm_abort), OP(isend),
    OP(irecv), OP(collective), OP(test), OP(wait), OP(req_free), OP(comm_split), OP(finalize),
    OP(comm_losses),
};

static void check_backend(const struct plx__backend *b, const uint8_t *data, size_t size)
{
    FUZZ_CHECK(!strcmp(b->name, "fz"));
    FUZZ_CHECK(memchr(b->reason, 0, sizeof b->reason));
    FUZZ_CHECK(b->state >= PLX_STATE_DISCOVERED && b->state <= PLX_STATE_DISABLED);
    unsigned entry_mode = size ? data[0] % 8 : 0;
    if (entry_mode >= 6) /* the entry point failed or gave no descriptor */
        FUZZ_CHECK(b->state == PLX_STATE_BROKEN);
    if (b->state == PLX_STATE_BROKEN)
        return;
    uint32_t declared = declared_size();
    FUZZ_CHECK(declared >= offsetof(struct plx_backend, comm_split)); /* ABI 1.0 at least */
    FUZZ_CHECK(b->abi_major == PLX_ABI_MAJOR && b->abi_minor <= PLX_ABI_MINOR);
    FUZZ_CHECK(b->ops.probe && b->ops.get_caps && b->ops.comm_create && b->ops.comm_destroy && b->ops.test &&
               b->ops.req_free);
    FUZZ_CHECK(b->ops.name && !strcmp(b->ops.name, b->name));
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
        void (*fn)(void);
        memcpy(&fn, (const char *)&b->ops + ops[i].off, sizeof fn);
        if (ops[i].off + sizeof fn > declared && fn) {
            fprintf(stderr, "loader kept '%s' (bytes %zu..%zu) from a struct_size of %u\n", ops[i].name,
                    ops[i].off, ops[i].off + sizeof fn, declared);
            FUZZ_CHECK(!"an operation beyond struct_size reads as NULL");
        }
    }
}

/* plx_backend_info with a caller-sized struct of exactly n bytes. */
static void check_info(size_t n)
{
    struct plx_backend_info *info = malloc(n ? n : 1);
    FUZZ_CHECK(info);
    memset(info, 0, n);
    if (n >= sizeof info->struct_size)
        info->struct_size = (uint32_t)n;
    int rc = n >= sizeof info->struct_size ? plx_backend_info(0, info) : PLX_ERR_INVALID_ARG;
    if (n >= offsetof(struct plx_backend_info, n_params)) {
        FUZZ_CHECK(rc == 0);
        FUZZ_CHECK(info->name && info->reason && info->library && info->dropin && info->version &&
                   info->description);
        for (size_t j = 0; n >= sizeof *info && j < info->n_params + 1; j++) {
            const char *k, *def, *help;
            int prc = plx_backend_param(0, j, &k, &def, &help);
            FUZZ_CHECK(j < info->n_params ? prc == 0 && k && def && help : prc != 0);
        }
    } else {
        FUZZ_CHECK(rc != 0);
    }
    free(info);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    setup();
    set_input(data, size);
    /* plx__loader_reset keeps the old backends (retired, not freed), on
     * purpose (a plugin may keep its host pointer, which lives inside). This
     * plugin does not, so the harness frees them itself, or a long run
     * would run out of memory; only the retired list of pointers grows,
     * which is why discovery is not leak-checked here. */
    for (size_t i = 0; i < plx__loader_count(); i++) {
        struct plx__backend *old = plx__loader_at(i);
        free(old->name);
        free(old->library);
        free(old->dropin);
        free(old->alias);
        free(old->own_keys);
        free(old->own_description);
        free(old);
    }
    plx__loader_reset();
    __lsan_disable();
    int rc = plx__loader_discover();
    __lsan_enable();
    FUZZ_CHECK(rc == 0);
    FUZZ_CHECK(plx__loader_count() == 1);
    const struct plx__backend *b = plx__loader_at(0);
    check_backend(b, data, size);

    struct plx__backend *sel = NULL;
    rc = plx__loader_select("fz", &sel);
    FUZZ_CHECK(b->state == PLX_STATE_USABLE ? rc == 0 && sel == b : rc != 0 && !sel && plx_last_error()[0]);
    rc = plx__loader_select("auto", &sel);
    FUZZ_CHECK(b->state == PLX_STATE_USABLE ? rc == 0 && sel == b : rc == PLX_ERR_UNAVAILABLE);

    size_t n = size ? data[size - 1] % (sizeof(struct plx_backend_info) + 8) : sizeof(struct plx_backend_info);
    check_info(n);
    check_info(sizeof(struct plx_backend_info));
    return 0;
}
