/* store_client - our tcp:// store client against a TCPStore hosted by torch
 * (torch_store_master.py): joins as a torch worker does (ADD "init/"), reads
 * what torch wrote, writes what torch then checks, and uses every query type
 * the client has: set, get (WAIT then GET), add, check, wait (including one
 * that times out, after which the client must still work), delete.
 * Keys carry the "/" prefix torch's own clients put on theirs.
 * Usage: store_client PORT */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "host.h"
#include "plexus/plexus.h"
#include "store.h"
#include "check.h"

static int failures;
static int get_is(struct plx_store *s, const char *key, const void *want, size_t n)
{
    void *v = NULL;
    size_t len = 0;
    int ok = plx__store_get(s, key, &v, &len, 20000) == 0 && len == n && (n == 0 || !memcmp(v, want, n));
    free(v);
    return ok;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: store_client PORT\n");
        return 2;
    }
    alarm(90);
    char url[64];
    snprintf(url, sizeof url, "tcp://127.0.0.1:%s", argv[1]);
    struct plx_store *s = NULL;
    /* rank 1: a client only; torch hosts the server */
    if (plx__store_open(url, 1, 2, 20000, &s) != 0) {
        fprintf(stderr, "store_client: %s\n", plx_last_error());
        return 1;
    }
    int64_t r = 0;
    CHECK(plx__store_add(s, "init/", 1, &r) == 0 && r >= 1); /* torch's master waits for this */

    static unsigned char blob[1 << 20];
    for (size_t i = 0; i < sizeof blob; i++)
        blob[i] = (unsigned char)i;
    CHECK(get_is(s, "/py_str", "from torch", 10));
    CHECK(get_is(s, "/py_bin", blob, sizeof blob));
    CHECK(get_is(s, "/py_ctr", "7", 1));
    CHECK(plx__store_add(s, "/py_ctr", 3, &r) == 0 && r == 10);
    CHECK(s->ops->check(s, "/py_str") == 1);
    CHECK(s->ops->check(s, "/absent") == 0);
    const char *both[] = {"/py_str", "/py_ctr"};
    CHECK(plx__store_wait(s, both, 2, 5000) == 0);

    /* A wait torch's server never answers: our timeout, naming the key. */
    const char *never[] = {"/py_str", "/never"};
    uint64_t t0 = plx__clock_ns();
    CHECK(plx__store_wait(s, never, 2, 300) == PLX_ERR_TIMEOUT);
    uint64_t ms = (plx__clock_ns() - t0) / 1000000;
    CHECK(ms >= 290 && ms < 5000);
    CHECK(strstr(plx_last_error(), "'/never'") && strstr(plx_last_error(), "timeout"));
    printf("wait timed out after %llu ms: %s\n", (unsigned long long)ms, plx_last_error());
    void *v = NULL;
    size_t n = 0;
    CHECK(plx__store_get(s, "/never", &v, &n, 200) == PLX_ERR_TIMEOUT);

    /* The client still works after those timeouts. */
    CHECK(plx__store_set(s, "/c_str", "from plexus", 11) == 0);
    CHECK(plx__store_set(s, "/c_bin", "a\0b\xff", 4) == 0);
    CHECK(plx__store_set(s, "/c_empty", "", 0) == 0);
    CHECK(plx__store_add(s, "/c_ctr", 5, &r) == 0 && r == 5);
    CHECK(plx__store_add(s, "/c_ctr", 5, &r) == 0 && r == 10);
    CHECK(s->ops->check(s, "/py_del") == 1);
    CHECK(s->ops->del(s, "/py_del") == 0);
    CHECK(s->ops->check(s, "/py_del") == 0);
    CHECK(plx__store_set(s, "/c_done", failures ? "fail" : "ok", failures ? 4 : 2) == 0);
    /* torch checks what we wrote, then releases us */
    CHECK(get_is(s, "/py_ack", "checked", 7));
    plx__store_release(s);
    if (failures)
        fprintf(stderr, "%d check(s) failed\n", failures);
    else
        printf("ok\n");
    return failures ? 1 : 0;
}
