/* fuzz_store_file.c - the file:// store (core/store_file.c) reading files
 * it did not write: fuzz bytes are put where the store keeps a key's value
 * (DIR/<std::hash of the key>), then the key is read, checked, added to,
 * read again and deleted through the store's operations.
 *
 * Input: byte 0 flags: bits 0-1 what lies at the key's path (0 a file with
 * the content below, 1 nothing, 2 a folder, 3 a sparse file one byte over
 * the size limit); bit 2 a key taken from the input (else "ctr"); bit 3 a
 * full 8-byte delta for add (else one signed byte). Then the delta, then
 * (bit 2) a length byte and the key, then the file's content.
 *
 * Checks beyond "no crash": get returns exactly the file's bytes, or an
 * error naming the folder; add succeeds exactly when the file holds a
 * decimal int64 (what TCPStore keeps) and the sum does not overflow, and
 * then get returns the sum in decimal; a failed add leaves the file as it
 * was; after del the key is gone. Waits use a zero timeout: nothing here
 * may sleep or block. */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "error.h"
#include "fuzz_check.h"
#include "store.h"
#include "store_file.h"

static char dir[PATH_MAX];
static struct plx_store *store;

static void cleanup(void)
{
    if (store)
        plx__store_release(store);
    char lock[PATH_MAX + 16];
    snprintf(lock, sizeof lock, "%s/.plexus-lock", dir);
    unlink(lock);
    rmdir(dir);
}

static void setup(void)
{
    if (store)
        return;
    const char *tmp = getenv("TMPDIR");
    char made[PATH_MAX];
    snprintf(made, sizeof made, "%s/plexus-fuzz-store-XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
    FUZZ_CHECK(mkdtemp(made));
    FUZZ_CHECK(realpath(made, dir)); /* the store names its folder canonically */
    char url[PATH_MAX + 16];
    snprintf(url, sizeof url, "file://%s", dir);
    FUZZ_CHECK(plx__store_open(url, 0, 1, 1000, &store) == 0);
    atexit(cleanup);
}

/* The value as TCPStore's counters hold it: optional '-', 1..19 digits. */
static int parse_decimal(const uint8_t *p, size_t n, int64_t *out)
{
    size_t i = n && p[0] == '-';
    if (n - i < 1 || n - i > 19)
        return 0;
    for (size_t k = i; k < n; k++)
        if (p[k] < '0' || p[k] > '9')
            return 0;
    char buf[24];
    memcpy(buf, p, n);
    buf[n] = '\0';
    errno = 0;
    long long v = strtoll(buf, NULL, 10);
    if (errno)
        return 0;
    *out = v;
    return 1;
}

static void check_error(int rc)
{
    FUZZ_CHECK(rc < 0);
    const char *e = plx_last_error();
    FUZZ_CHECK(e && strstr(e, dir));
}

/* get with a zero timeout: 0 and the value, or an error. */
static int get(const char *key, void **val, size_t *len)
{
    *val = NULL;
    *len = 0;
    return store->ops->get(store, key, val, len, 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    setup();
    size_t i = 0;
#define TAKE() (i < size ? data[i++] : 0u)
    unsigned flags = TAKE();
    int64_t delta;
    if (flags & 8) {
        uint64_t d = 0;
        for (int k = 0; k < 8; k++)
            d |= (uint64_t)TAKE() << (8 * k);
        memcpy(&delta, &d, sizeof delta);
    } else {
        delta = (int8_t)TAKE();
    }
    char key[33] = "ctr";
    if (flags & 4) {
        size_t n = TAKE() % sizeof key, k = 0;
        while (k < n && i < size && data[i])
            key[k++] = (char)data[i++];
        key[k] = '\0';
    }
#undef TAKE
    const uint8_t *content = data + (i < size ? i : size);
    size_t clen = size - (size_t)(content - data);

    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/%" PRIu64, dir, plx__store_file_hash(key, strlen(key)));
    unsigned kind = flags & 3;
    if (kind == 0 || kind == 3) {
        FILE *f = fopen(path, "wb");
        FUZZ_CHECK(f);
        FUZZ_CHECK(fwrite(content, 1, clen, f) == clen);
        if (kind == 3)
            FUZZ_CHECK(ftruncate(fileno(f), (off_t)PLX__STORE_FILE_MAX_VALUE + 1) == 0);
        FUZZ_CHECK(fclose(f) == 0);
    } else if (kind == 2) {
        FUZZ_CHECK(mkdir(path, 0700) == 0);
    }

    /* get: the file's exact bytes, or an error for a folder or a too-big file. */
    void *val;
    size_t len;
    int rc = get(key, &val, &len);
    if (kind == 0) {
        FUZZ_CHECK(rc == 0 && len == clen && (clen == 0 || !memcmp(val, content, clen)));
    } else {
        check_error(rc);
        FUZZ_CHECK(rc != PLX_ERR_TIMEOUT || kind == 1);
    }
    free(val);
    FUZZ_CHECK(store->ops->check(store, key) == (kind != 1));

    /* add: only onto a decimal counter (or a missing key, which counts as 0). */
    int64_t old = 0, sum = 0, result = 0;
    int counter = kind == 1 || (kind == 0 && parse_decimal(content, clen, &old));
    int ok = counter && !__builtin_add_overflow(old, delta, &sum);
    rc = store->ops->add(store, key, delta, &result);
    if (ok) {
        FUZZ_CHECK(rc == 0 && result == sum);
        char want[24];
        int n = snprintf(want, sizeof want, "%" PRId64, sum);
        FUZZ_CHECK(get(key, &val, &len) == 0 && len == (size_t)n && !memcmp(val, want, len));
        free(val);
    } else {
        check_error(rc);
        if (kind == 0) { /* untouched */
            FUZZ_CHECK(get(key, &val, &len) == 0 && len == clen && (clen == 0 || !memcmp(val, content, clen)));
            free(val);
        }
    }

    /* del: the key is gone (a folder is not removed: it is not a value). */
    rc = store->ops->del(store, key);
    if (kind == 2) {
        check_error(rc);
        FUZZ_CHECK(rmdir(path) == 0);
    } else {
        FUZZ_CHECK(rc == 0);
    }
    FUZZ_CHECK(store->ops->check(store, key) == 0);
    const char *keys[] = {key};
    FUZZ_CHECK(store->ops->wait(store, keys, 1, 0) == PLX_ERR_TIMEOUT);
    FUZZ_CHECK(get(key, &val, &len) == PLX_ERR_TIMEOUT);
    return 0;
}
