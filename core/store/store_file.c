/* store_file.c - file:///DIR: a store in a shared directory, laid out like
 * Gloo's FileStore so plexus and Gloo ranks can rendezvous in one folder.
 *
 * A key's value is the whole content of DIR/<hash>, where <hash> is
 * libstdc++'s std::hash of the key in decimal (the key itself is not
 * stored). Writers put the value in a temporary file whose name is unique to
 * the writer and rename() it into place, so a reader opens either the old
 * file or the new one, never a partial one. Readers poll, as Gloo does,
 * because inotify does not see other hosts' writes on NFS.
 *
 * add() is a read-modify-write, made atomic across processes and hosts by
 * an exclusive flock() on DIR/.plexus-lock that every plexus writer (set,
 * add, del) holds around its change: two adds can't both read the same old
 * value because the second cannot read before the first has renamed its
 * result into place and dropped the lock. The kernel drops the lock when a
 * holder dies, so a crashed rank cannot wedge the store; on NFS, Linux maps
 * flock() to byte-range locks the server arbitrates. Gloo's own writers do
 * not take this lock, which is fine: Gloo only ever sets each key once.
 *
 * Files are never deleted at the end of a job (Gloo's are not either), so a
 * folder serves one job: keys an earlier job left would be read as this
 * one's. Gloo's FileStore refuses to set a key that exists and to read an
 * empty value; plexus does both. */
#include "store_file.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "error.h"
#include "store.h"

/* ---- libstdc++'s std::hash<std::string> -------------------------------- */

/* Murmur-style mixing over 8-byte little-endian words, then the tail bytes,
 * then a final avalanche: the 64-bit _Hash_bytes of libstdc++ with the seed
 * std::hash passes. Loads are byte-wise so the result does not depend on the
 * host's alignment rules. */
static uint64_t mix(uint64_t v)
{
    return v ^ (v >> 47);
}

static uint64_t load_le(const unsigned char *p, size_t n)
{
    uint64_t v = 0;
    while (n--)
        v = (v << 8) | p[n];
    return v;
}

uint64_t plx__store_file_hash(const void *key, size_t len)
{
    const uint64_t mul = 0xc6a4a7935bd1e995ull, seed = 0xc70f6907ull;
    const unsigned char *p = key;
    uint64_t h = seed ^ ((uint64_t)len * mul);
    size_t words = len / 8;
    for (size_t i = 0; i < words; i++, p += 8) {
        h ^= mix(load_le(p, 8) * mul) * mul;
        h *= mul;
    }
    if (len % 8) {
        h ^= load_le(p, len % 8);
        h *= mul;
    }
    return mix(mix(h) * mul);
}

/* ---- paths, locking, whole-file reads and writes ----------------------- */

struct fstore {
    struct plx_store base;
    char dir[PATH_MAX];
    unsigned long long nonce; /* makes temporary names unique across hosts */
};

static unsigned long temp_count;

static void key_path(const struct fstore *f, const char *key, char *out, size_t n)
{
    snprintf(out, n, "%s/%" PRIu64, f->dir, plx__store_file_hash(key, strlen(key)));
}

static int past(uint64_t deadline)
{
    return plx__clock_ns() >= deadline;
}

/* Sleep between polls: 1 ms at first, growing to 10 ms (Gloo's interval). */
static void backoff(long *us)
{
    struct timespec ts = {0, *us * 1000};
    nanosleep(&ts, NULL);
    *us = *us * 2 < 10000 ? *us * 2 : 10000;
}

/* Take the directory's writer lock; *fd releases it when closed. */
static int lock_dir(struct fstore *f, const char *what, const char *key, int *fd)
{
    char path[PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/.plexus-lock", f->dir);
    *fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (*fd < 0)
        return plx__err(PLX_ERR_SYSTEM, "file store %s: %s '%s': cannot open the lock file %s: %s", f->dir, what, key,
                        path, strerror(errno));
    uint64_t deadline = plx__deadline_ms(f->base.timeout_ms);
    long us = 1000;
    while (flock(*fd, LOCK_EX | LOCK_NB) != 0) {
        int e = errno;
        if (e != EWOULDBLOCK && e != EINTR) {
            close(*fd);
            return plx__err(PLX_ERR_SYSTEM, "file store %s: %s '%s': cannot lock %s: %s", f->dir, what, key, path,
                            strerror(e));
        }
        if (past(deadline)) {
            close(*fd);
            return plx__err(PLX_ERR_TIMEOUT, "file store %s: %s '%s': the lock %s stayed held for %lld ms", f->dir,
                            what, key, path, (long long)f->base.timeout_ms);
        }
        backoff(&us);
    }
    return 0;
}

/* Read key's file. Returns 0 with *val malloc'ed, 1 if the file does not
 * exist, or a negative error. The size is bounded before anything is
 * allocated; files are replaced whole by rename, so an open one is stable. */
static int read_value(struct fstore *f, const char *key, void **val, size_t *len)
{
    char path[PATH_MAX + 32];
    key_path(f, key, path, sizeof path);
    /* O_NONBLOCK: a FIFO planted at a key's path must not block the open past any timeout. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        if (errno == ENOENT)
            return 1;
        return plx__err(PLX_ERR_SYSTEM, "file store %s: key '%s': cannot open %s: %s", f->dir, key, path,
                        strerror(errno));
    }
    struct stat st;
    int rc = 0;
    if (fstat(fd, &st) != 0)
        rc = plx__err(PLX_ERR_SYSTEM, "file store %s: key '%s': cannot stat %s: %s", f->dir, key, path, strerror(errno));
    else if (!S_ISREG(st.st_mode))
        rc = plx__err(PLX_ERR_PROTOCOL, "file store %s: key '%s': %s is not a regular file", f->dir, key, path);
    else if ((uint64_t)st.st_size > PLX__STORE_FILE_MAX_VALUE)
        rc = plx__err(PLX_ERR_PROTOCOL, "file store %s: key '%s': %s holds %lld bytes, more than the %u-byte limit "
                      "(a corrupt or foreign file?)", f->dir, key, path, (long long)st.st_size,
                      PLX__STORE_FILE_MAX_VALUE);
    char *buf = rc ? NULL : malloc((size_t)st.st_size + 1);
    if (!rc && !buf)
        rc = plx__err(PLX_ERR_NOMEM, "file store %s: key '%s': out of memory", f->dir, key);
    /* Read one byte past the size we saw, to notice a file written in place. */
    size_t got = 0, want = rc ? 0 : (size_t)st.st_size + 1;
    while (!rc && got < want) {
        ssize_t k = read(fd, buf + got, want - got);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0)
            rc = plx__err(PLX_ERR_SYSTEM, "file store %s: key '%s': cannot read %s: %s", f->dir, key, path,
                          strerror(errno));
        else if (k == 0)
            break;
        else
            got += (size_t)k;
    }
    if (!rc && got > (size_t)st.st_size)
        rc = plx__err(PLX_ERR_PROTOCOL, "file store %s: key '%s': %s grew while it was read (written in place, "
                      "not renamed into place?)", f->dir, key, path);
    close(fd);
    if (rc) {
        free(buf);
        return rc;
    }
    *val = buf;
    *len = got;
    return 0;
}

static int write_all(int fd, const void *p, size_t n)
{
    const char *c = p;
    while (n) {
        ssize_t k = write(fd, c, n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0)
            return -1;
        c += k;
        n -= (size_t)k;
    }
    return 0;
}

/* Write val to a temporary name unique to this writer (pid, a per-open
 * nonce for other hosts, a counter for other threads), then rename it over
 * key's file. The temporary starts with '.' as Gloo's does. */
static int write_value(struct fstore *f, const char *key, const void *val, size_t len)
{
    char path[PATH_MAX + 32], tmp[PATH_MAX + 96];
    key_path(f, key, path, sizeof path);
    snprintf(tmp, sizeof tmp, "%s/.%" PRIu64 ".tmp.%ld.%llx.%lu", f->dir, plx__store_file_hash(key, strlen(key)),
             (long)getpid(), f->nonce, __atomic_add_fetch(&temp_count, 1, __ATOMIC_RELAXED));
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0)
        return plx__err(PLX_ERR_SYSTEM, "file store %s: set '%s': cannot create %s: %s", f->dir, key, tmp,
                        strerror(errno));
    int e = write_all(fd, val, len) ? errno : 0;
    if (close(fd) != 0 && !e)
        e = errno;
    if (!e && rename(tmp, path) != 0)
        e = errno;
    if (e) {
        unlink(tmp);
        return plx__err(PLX_ERR_SYSTEM, "file store %s: set '%s': cannot write %s: %s", f->dir, key, path,
                        strerror(e));
    }
    return 0;
}

/* ---- the store operations ----------------------------------------------- */

static int f_set(struct plx_store *s, const char *key, const void *val, size_t len)
{
    struct fstore *f = (struct fstore *)s;
    int lk, rc = lock_dir(f, "set", key, &lk);
    if (rc)
        return rc;
    rc = write_value(f, key, val, len);
    close(lk);
    return rc;
}

/* 1 if every key's file exists, 0 if *missing does not, or an error. */
static int all_exist(struct fstore *f, const char *const *keys, size_t n, const char **missing)
{
    for (size_t i = 0; i < n; i++) {
        char path[PATH_MAX + 32];
        key_path(f, keys[i], path, sizeof path);
        struct stat st;
        if (stat(path, &st) == 0)
            continue;
        if (errno != ENOENT)
            return plx__err(PLX_ERR_SYSTEM, "file store %s: key '%s': cannot stat %s: %s", f->dir, keys[i], path,
                            strerror(errno));
        *missing = keys[i];
        return 0;
    }
    return 1;
}

static int f_wait(struct plx_store *s, const char *const *keys, size_t n, int64_t timeout_ms)
{
    struct fstore *f = (struct fstore *)s;
    uint64_t deadline = plx__deadline_ms(timeout_ms);
    long us = 1000;
    for (;;) {
        const char *missing = NULL;
        int rc = all_exist(f, keys, n, &missing);
        if (rc != 0)
            return rc < 0 ? rc : 0;
        if (past(deadline)) {
            char path[PATH_MAX + 32];
            key_path(f, missing, path, sizeof path);
            return plx__err(PLX_ERR_TIMEOUT, "file store %s: key '%s' (file %s) not set within %lld ms", f->dir,
                            missing, path, (long long)timeout_ms);
        }
        backoff(&us);
    }
}

static int f_get(struct plx_store *s, const char *key, void **val, size_t *len, int64_t timeout_ms)
{
    struct fstore *f = (struct fstore *)s;
    uint64_t deadline = plx__deadline_ms(timeout_ms);
    long us = 1000;
    for (;;) {
        int rc = read_value(f, key, val, len);
        if (rc <= 0)
            return rc;
        if (past(deadline)) {
            char path[PATH_MAX + 32];
            key_path(f, key, path, sizeof path);
            return plx__err(PLX_ERR_TIMEOUT, "file store %s: key '%s' (file %s) not set within %lld ms", f->dir, key,
                            path, (long long)timeout_ms);
        }
        backoff(&us);
    }
}

/* Counters are decimal text, as TCPStore keeps them; anything else in the
 * file is reported rather than read as 0. */
static int parse_counter(struct fstore *f, const char *key, const char *text, size_t len, int64_t *out)
{
    char buf[24];
    size_t digits = len && text[0] == '-' ? len - 1 : len;
    int ok = digits > 0 && digits <= 19;
    for (size_t i = len - digits; ok && i < len; i++)
        ok = text[i] >= '0' && text[i] <= '9';
    if (ok) {
        memcpy(buf, text, len);
        buf[len] = '\0';
        errno = 0;
        long long v = strtoll(buf, NULL, 10);
        ok = errno == 0;
        *out = v;
    }
    return ok ? 0 : plx__err(PLX_ERR_PROTOCOL, "file store %s: add '%s': the key holds %zu bytes that are not a "
                             "decimal counter", f->dir, key, len);
}

static int f_add(struct plx_store *s, const char *key, int64_t delta, int64_t *result)
{
    struct fstore *f = (struct fstore *)s;
    int lk, rc = lock_dir(f, "add", key, &lk);
    if (rc)
        return rc;
    void *old = NULL;
    size_t len = 0;
    int64_t v = 0;
    rc = read_value(f, key, &old, &len);
    if (rc == 0)
        rc = parse_counter(f, key, old, len, &v);
    else if (rc == 1)
        rc = 0; /* a missing counter starts at 0 */
    free(old);
    if (rc == 0 && __builtin_add_overflow(v, delta, &v))
        rc = plx__err(PLX_ERR_INVALID_ARG, "file store %s: add '%s': %lld + %lld overflows", f->dir, key,
                      (long long)v, (long long)delta);
    if (rc == 0) {
        char text[24];
        int n = snprintf(text, sizeof text, "%lld", (long long)v);
        rc = write_value(f, key, text, (size_t)n);
    }
    close(lk);
    if (rc == 0 && result)
        *result = v;
    return rc;
}

static int f_check(struct plx_store *s, const char *key)
{
    const char *missing = NULL;
    return all_exist((struct fstore *)s, &key, 1, &missing);
}

static int f_del(struct plx_store *s, const char *key)
{
    struct fstore *f = (struct fstore *)s;
    int lk, rc = lock_dir(f, "delete", key, &lk);
    if (rc)
        return rc;
    char path[PATH_MAX + 32];
    key_path(f, key, path, sizeof path);
    if (unlink(path) != 0 && errno != ENOENT)
        rc = plx__err(PLX_ERR_SYSTEM, "file store %s: delete '%s': cannot remove %s: %s", f->dir, key, path,
                      strerror(errno));
    close(lk);
    return rc;
}

static void f_destroy(struct plx_store *s)
{
    free(s);
}

static const struct plx__store_ops file_ops = {
    .set = f_set, .get = f_get, .add = f_add, .wait = f_wait, .check = f_check, .del = f_del, .destroy = f_destroy,
};

/* mkdir -p: ranks race to create the folder, so EEXIST is success. */
static int make_dirs(char *path)
{
    for (char *p = path + 1;; p++) {
        if (*p != '/' && *p != '\0')
            continue;
        char c = *p;
        *p = '\0';
        int rc = mkdir(path, 0700); /* only this user can plant keys */
        int e = errno;
        *p = c;
        if (rc != 0 && e != EEXIST)
            return e;
        if (!c)
            return 0;
    }
}

int plx__store_file_open(const struct plx_config *v, const char *rest, int rank, int size, int64_t timeout_ms,
                         struct plx_store **out)
{
    (void)v;
    (void)rank;
    (void)size;
    *out = NULL;
    if (rest[0] != '/' || strlen(rest) >= PATH_MAX - 64)
        return plx__err(PLX_ERR_INVALID_ARG, "store url 'file://%s': expected file:///ABSOLUTE/DIR", rest);
    char want[PATH_MAX];
    snprintf(want, sizeof want, "%s", rest);
    int e = make_dirs(want);
    if (e)
        return plx__err(PLX_ERR_SYSTEM, "file store %s: cannot create the folder: %s", rest, strerror(e));
    struct fstore *f = calloc(1, sizeof *f);
    if (!f)
        return plx__err(PLX_ERR_NOMEM, "file store %s: out of memory", rest);
    /* Canonical, as Gloo makes it, so messages show the real folder. */
    if (!realpath(want, f->dir))
        e = errno;
    else if (strlen(f->dir) >= PATH_MAX - 64)
        e = ENAMETOOLONG;
    else if (access(f->dir, W_OK | X_OK) != 0)
        e = errno;
    if (e) {
        free(f);
        return plx__err(PLX_ERR_SYSTEM, "file store %s: the folder is not usable: %s", rest, strerror(e));
    }
    f->nonce = plx__clock_ns() ^ ((unsigned long long)getpid() << 32) ^ (unsigned long long)(uintptr_t)f;
    f->base.ops = &file_ops;
    f->base.timeout_ms = timeout_ms;
    *out = &f->base;
    return 0;
}
