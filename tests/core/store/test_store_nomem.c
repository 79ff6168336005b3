/* test_store_nomem.c - a tcp:// store request that cannot be built for want
 * of memory fails with PLX_ERR_NOMEM. realloc is wrapped (-Wl,--wrap=realloc)
 * to fail while `starve` is set; every client operation must then answer
 * PLX_ERR_NOMEM, never 1 (which check() would read as "the key exists"),
 * and work again once memory is back. */
#include <stdio.h>
#include <stdlib.h>

#include "plexus/plexus.h"
#include "store.h"
#include "store_tcp.h"
#include "check.h"

static int failures;
/* Only the client's (this) thread starves: the store server's thread
 * allocates too, and must keep serving. */
static _Thread_local int starve;

void *__real_realloc(void *p, size_t n);
void *__wrap_realloc(void *p, size_t n);
void *__wrap_realloc(void *p, size_t n)
{
    return starve ? NULL : __real_realloc(p, n);
}

int main(void)
{
    struct plx__store_server *srv = NULL;
    int port = 0;
    CHECK(plx__store_server_start("127.0.0.1", 0, &srv, &port) == 0);
    char url[64];
    snprintf(url, sizeof url, "tcp://127.0.0.1:%d", port);
    struct plx_store *s = NULL;
    CHECK(plx__store_open(url, 1, 2, 10000, &s) == 0);
    if (!s)
        return 1;
    CHECK(s->ops->set(s, "k", "v", 1) == 0);

    starve = 1;
    int check = s->ops->check(s, "absent");
    int set = s->ops->set(s, "k2", "v", 1);
    int64_t v = 0;
    int add = s->ops->add(s, "n", 1, &v);
    int del = s->ops->del(s, "k");
    void *val = NULL;
    size_t len = 0;
    int get = s->ops->get(s, "k", &val, &len, 1000);
    const char *keys[] = {"k"};
    int wait = s->ops->wait(s, keys, 1, 1000);
    starve = 0;
    printf("out of memory: check %d set %d add %d del %d get %d wait %d (PLX_ERR_NOMEM is %d)\n", check, set, add, del,
           get, wait, PLX_ERR_NOMEM);
    CHECK(check == PLX_ERR_NOMEM);
    CHECK(set == PLX_ERR_NOMEM);
    CHECK(add == PLX_ERR_NOMEM);
    CHECK(del == PLX_ERR_NOMEM);
    CHECK(get == PLX_ERR_NOMEM);
    CHECK(wait == PLX_ERR_NOMEM);
    free(val);

    /* Memory back: the same connection serves again. */
    CHECK(s->ops->check(s, "absent") == 0);
    CHECK(s->ops->check(s, "k") == 1);
    plx__store_release(s);
    plx__store_server_stop(srv);
    if (failures)
        fprintf(stderr, "%d check(s) failed\n", failures);
    return failures ? 1 : 0;
}
