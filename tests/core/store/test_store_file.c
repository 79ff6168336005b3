/* The file:// store in one process: Gloo's file names (libstdc++ hashes),
 * set/get/add/wait/check/del, timeouts that name the key and folder,
 * corrupt and oversized files, a lock held by someone else. */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "host.h"
#include "store.h"
#include "store_file.h"
#include "check.h"

static int failures;
static char dir[256], url[300];

static void path_of(const char *name, char *out, size_t n)
{
    snprintf(out, n, "%s/%s", dir, name);
}

static int read_file(const char *name, char *buf, size_t cap)
{
    char p[512];
    path_of(name, p, sizeof p);
    int fd = open(p, O_RDONLY);
    if (fd < 0)
        return -1;
    ssize_t k = read(fd, buf, cap);
    close(fd);
    return (int)k;
}

static void write_file(const char *name, const void *data, size_t n)
{
    char p[512];
    path_of(name, p, sizeof p);
    int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || write(fd, data, n) != (ssize_t)n)
        perror(p);
    if (fd >= 0)
        close(fd);
}

static char *hash_name(const char *key, char *buf, size_t n)
{
    snprintf(buf, n, "%llu", (unsigned long long)plx__store_file_hash(key, strlen(key)));
    return buf;
}

/* Everything in the folder is a key file or the lock: no temporaries left. */
static int only_keys_and_lock(void)
{
    DIR *d = opendir(dir);
    int ok = d != NULL;
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && strcmp(e->d_name, ".plexus-lock") &&
            strspn(e->d_name, "0123456789") != strlen(e->d_name)) {
            fprintf(stderr, "left behind: %s\n", e->d_name);
            ok = 0;
        }
    if (d)
        closedir(d);
    return ok;
}

static void remove_tree(const char *path)
{
    DIR *d = opendir(path);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        char p[600];
        snprintf(p, sizeof p, "%s/%s", path, e->d_name);
        struct stat st;
        if (lstat(p, &st) == 0 && S_ISDIR(st.st_mode))
            remove_tree(p);
        else
            unlink(p);
    }
    if (d)
        closedir(d);
    rmdir(path);
}

static void test_hash(void)
{
    /* Values printed by std::hash<std::string> from Debian's libstdc++. */
    CHECK(plx__store_file_hash("rank_0", 6) == 7977090932840177126ull);
    CHECK(plx__store_file_hash("0", 1) == 2297668033614959926ull);
    CHECK(plx__store_file_hash("", 0) == 6142509188972423790ull);
    CHECK(plx__store_file_hash("abcdefgh", 8) == 8664279048047335611ull);     /* one whole word */
    CHECK(plx__store_file_hash("abcdefghi", 9) == 13036955925923793583ull);   /* a word and a tail */
}

static void test_basic(struct plx_store *s)
{
    void *v = NULL;
    size_t n = 0;
    char name[32], buf[64];

    /* set/get, and the file is where Gloo looks for it, holding the raw value */
    CHECK(plx__store_set(s, "rank_0", "hello", 5) == 0);
    CHECK(read_file("7977090932840177126", buf, sizeof buf) == 5 && !memcmp(buf, "hello", 5));
    CHECK(plx__store_get(s, "rank_0", &v, &n, 100) == 0);
    CHECK(n == 5 && v && !memcmp(v, "hello", 5));
    free(v);

    /* overwrite, binary bytes, an empty value */
    CHECK(plx__store_set(s, "rank_0", "a\0b", 3) == 0);
    CHECK(plx__store_get(s, "rank_0", &v, &n, 100) == 0);
    CHECK(n == 3 && v && !memcmp(v, "a\0b", 3));
    free(v);
    CHECK(plx__store_set(s, "empty", "", 0) == 0);
    CHECK(plx__store_get(s, "empty", &v, &n, 100) == 0 && n == 0);
    free(v);

    /* a value written by someone else (Gloo writes raw bytes too) */
    write_file(hash_name("foreign", name, sizeof name), "xyz", 3);
    CHECK(plx__store_get(s, "foreign", &v, &n, 100) == 0 && n == 3 && v && !memcmp(v, "xyz", 3));
    free(v);

    /* check, wait, del */
    CHECK(s->ops->check(s, "rank_0") == 1);
    CHECK(s->ops->check(s, "nope") == 0);
    const char *both[] = {"rank_0", "empty"};
    CHECK(plx__store_wait(s, both, 2, 100) == 0);
    CHECK(s->ops->del(s, "rank_0") == 0);
    CHECK(s->ops->check(s, "rank_0") == 0);
    CHECK(read_file("7977090932840177126", buf, sizeof buf) < 0);
    CHECK(s->ops->del(s, "rank_0") == 0); /* deleting a missing key is not an error */

    /* add: a missing counter starts at 0; the file is decimal text */
    int64_t r = -1;
    CHECK(plx__store_add(s, "ctr", 5, &r) == 0 && r == 5);
    CHECK(plx__store_add(s, "ctr", -7, &r) == 0 && r == -2);
    CHECK(read_file(hash_name("ctr", name, sizeof name), buf, sizeof buf) == 2 && !memcmp(buf, "-2", 2));
    CHECK(plx__store_get(s, "ctr", &v, &n, 100) == 0 && n == 2 && v && !memcmp(v, "-2", 2));
    free(v);
    CHECK(plx__store_set(s, "ctr2", "9223372036854775807", 19) == 0);
    CHECK(plx__store_add(s, "ctr2", 1, &r) == PLX_ERR_INVALID_ARG);
    CHECK(strstr(plx_last_error(), "overflows") != NULL);

    CHECK(only_keys_and_lock());
}

static void test_timeouts(struct plx_store *s)
{
    void *v = NULL;
    size_t n = 0;
    char name[32];

    uint64_t t0 = plx__clock_ns();
    CHECK(plx__store_get(s, "late", &v, &n, 200) == PLX_ERR_TIMEOUT);
    uint64_t ms = (plx__clock_ns() - t0) / 1000000;
    CHECK(ms >= 190 && ms < 2000);
    CHECK(strstr(plx_last_error(), "'late'") && strstr(plx_last_error(), dir));
    CHECK(strstr(plx_last_error(), hash_name("late", name, sizeof name)));

    CHECK(plx__store_set(s, "here", "1", 1) == 0);
    const char *keys[] = {"here", "missing"};
    t0 = plx__clock_ns();
    CHECK(plx__store_wait(s, keys, 2, 150) == PLX_ERR_TIMEOUT);
    ms = (plx__clock_ns() - t0) / 1000000;
    CHECK(ms >= 140 && ms < 2000);
    CHECK(strstr(plx_last_error(), "'missing'") && !strstr(plx_last_error(), "'here'"));

    /* -1 means the store's default (300 ms here) */
    t0 = plx__clock_ns();
    CHECK(plx__store_get(s, "late", &v, &n, -1) == PLX_ERR_TIMEOUT);
    ms = (plx__clock_ns() - t0) / 1000000;
    CHECK(ms >= 290 && ms < 2000);

    /* a writer lock held elsewhere: set gives up after the default timeout */
    char p[512];
    path_of(".plexus-lock", p, sizeof p);
    int fd = open(p, O_RDWR | O_CREAT, 0644);
    CHECK(fd >= 0 && flock(fd, LOCK_EX) == 0);
    t0 = plx__clock_ns();
    CHECK(plx__store_set(s, "blocked", "1", 1) == PLX_ERR_TIMEOUT);
    CHECK(plx__store_add(s, "blocked", 1, NULL) == PLX_ERR_TIMEOUT);
    ms = (plx__clock_ns() - t0) / 1000000;
    CHECK(ms >= 580 && ms < 4000);
    CHECK(strstr(plx_last_error(), ".plexus-lock") != NULL);
    close(fd); /* releases it */
    CHECK(plx__store_set(s, "blocked", "1", 1) == 0);
}

static void test_corrupt(struct plx_store *s)
{
    void *v = (void *)1;
    size_t n = 0;
    char name[32], p[512];

    /* A counter file that is not a number, or too long to be one. */
    write_file(hash_name("badctr", name, sizeof name), "12x", 3);
    CHECK(plx__store_add(s, "badctr", 1, NULL) == PLX_ERR_PROTOCOL);
    CHECK(strstr(plx_last_error(), "'badctr'") && strstr(plx_last_error(), "not a decimal counter"));
    write_file(name, "123456789012345678901234567890", 30);
    CHECK(plx__store_add(s, "badctr", 1, NULL) == PLX_ERR_PROTOCOL);
    write_file(name, "", 0);
    CHECK(plx__store_add(s, "badctr", 1, NULL) == PLX_ERR_PROTOCOL);
    write_file(name, "-", 1);
    CHECK(plx__store_add(s, "badctr", 1, NULL) == PLX_ERR_PROTOCOL);
    write_file(name, "99999999999999999999", 20);
    CHECK(plx__store_add(s, "badctr", 1, NULL) == PLX_ERR_PROTOCOL);

    /* A huge (sparse) file is refused before anything is allocated. */
    path_of(hash_name("huge", name, sizeof name), p, sizeof p);
    int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    CHECK(fd >= 0 && ftruncate(fd, (off_t)1 << 40) == 0);
    close(fd);
    CHECK(plx__store_get(s, "huge", &v, &n, 100) == PLX_ERR_PROTOCOL);
    CHECK(strstr(plx_last_error(), "'huge'") && strstr(plx_last_error(), "limit"));
    CHECK(plx__store_add(s, "huge", 1, NULL) == PLX_ERR_PROTOCOL);
    /* one byte over the limit is too much; the limit itself is fine */
    fd = open(p, O_WRONLY | O_TRUNC);
    CHECK(fd >= 0 && ftruncate(fd, PLX__STORE_FILE_MAX_VALUE + 1) == 0);
    close(fd);
    CHECK(plx__store_get(s, "huge", &v, &n, 100) == PLX_ERR_PROTOCOL);
    fd = open(p, O_WRONLY | O_TRUNC);
    CHECK(fd >= 0 && ftruncate(fd, PLX__STORE_FILE_MAX_VALUE) == 0);
    close(fd);
    CHECK(plx__store_get(s, "huge", &v, &n, 100) == 0 && n == PLX__STORE_FILE_MAX_VALUE);
    free(v);
    unlink(p);

    /* Something that is not a file where a key's file should be. */
    path_of(hash_name("adir", name, sizeof name), p, sizeof p);
    CHECK(mkdir(p, 0755) == 0);
    CHECK(plx__store_get(s, "adir", &v, &n, 100) == PLX_ERR_PROTOCOL);
    CHECK(strstr(plx_last_error(), "not a regular file") != NULL);
    rmdir(p);

    /* A FIFO (found by fuzz_store_file): opening it must not block forever. */
    path_of(hash_name("afifo", name, sizeof name), p, sizeof p);
    CHECK(mkfifo(p, 0600) == 0);
    CHECK(plx__store_get(s, "afifo", &v, &n, 100) == PLX_ERR_PROTOCOL);
    CHECK(strstr(plx_last_error(), "not a regular file") != NULL);
    unlink(p);
}

static void test_open(void)
{
    struct plx_store *s = NULL;
    CHECK(plx__store_open("file://relative/dir", 0, 1, 100, &s) == PLX_ERR_INVALID_ARG && !s);
    CHECK(strstr(plx_last_error(), "file:///") != NULL);

    /* Missing folders are created (ranks race to do it). */
    char nested[400];
    snprintf(nested, sizeof nested, "file://%s/a/b/c", dir);
    CHECK(plx__store_open(nested, 0, 1, 100, &s) == 0 && s);
    CHECK(s && plx__store_set(s, "k", "v", 1) == 0);
    plx__store_release(s);
    snprintf(nested, sizeof nested, "%s/a/b/c", dir);
    struct stat st;
    CHECK(stat(nested, &st) == 0 && S_ISDIR(st.st_mode));
    char sub[400];
    snprintf(sub, sizeof sub, "%s/a", dir);
    remove_tree(sub);

    /* A path through a regular file is an error that names it. */
    write_file("plain", "x", 1);
    snprintf(nested, sizeof nested, "file://%s/plain/sub", dir);
    s = NULL;
    CHECK(plx__store_open(nested, 0, 1, 100, &s) == PLX_ERR_SYSTEM && !s);
    CHECK(strstr(plx_last_error(), "plain/sub") != NULL);
    path_of("plain", sub, sizeof sub);
    unlink(sub);
}

/* Views namespace keys exactly as the tcp and mem stores do. */
static void test_prefixed(struct plx_store *s)
{
    struct plx_store *p = NULL;
    void *v = NULL;
    size_t n = 0;
    char name[32], buf[8];
    CHECK(plx__store_prefixed(s, "world", &p) == 0);
    CHECK(plx__store_set(p, "0", "addr", 4) == 0);
    CHECK(read_file(hash_name("world/0", name, sizeof name), buf, sizeof buf) == 4);
    CHECK(plx__store_get(s, "world/0", &v, &n, 100) == 0 && n == 4);
    free(v);
    CHECK(plx__store_get(p, "1", &v, &n, 50) == PLX_ERR_TIMEOUT);
    CHECK(strstr(plx_last_error(), "'world/1'") != NULL);
    plx__store_release(p);
}

int main(void)
{
    snprintf(dir, sizeof dir, "%s/plexus-filestore-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    snprintf(url, sizeof url, "file://%s", dir);
    test_hash();
    struct plx_store *s = NULL;
    CHECK(plx__store_open(url, 0, 1, 300, &s) == 0 && s);
    if (s) { /* 300 ms: the default timeout test_timeouts expects */
        test_basic(s);
        test_timeouts(s);
        test_corrupt(s);
        test_prefixed(s);
        plx__store_release(s);
    }
    test_open();
    remove_tree(dir);
    if (failures)
        fprintf(stderr, "%d check(s) failed\n", failures);
    else
        printf("ok\n");
    return failures ? 1 : 0;
}
