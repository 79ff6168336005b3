/* The mem:// store: shared by threads opening the same name, prefixed
 * views, add, and a wait that times out in bounded time. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "host.h"
#include "store.h"
#include "check.h"

static int failures;
static void *adder(void *arg)
{
    struct plx_store *s = NULL;
    (void)arg;
    if (plx__store_open("mem://adders", 0, 1, 1000, &s) != 0)
        return NULL;
    for (int i = 0; i < 1000; i++)
        plx__store_add(s, "counter", 1, NULL);
    plx__store_set(s, "done", "1", 1);
    plx__store_release(s);
    return NULL;
}

int main(void)
{
    struct plx_store *a, *b, *pa, *pb;
    CHECK(plx__store_open("mem://t1", 0, 2, 2000, &a) == 0);
    CHECK(plx__store_open("mem://t1", 1, 2, 2000, &b) == 0);
    CHECK(plx__store_set(a, "k", "hello", 5) == 0);
    void *v = NULL;
    size_t n = 0;
    CHECK(plx__store_get(b, "k", &v, &n, -1) == 0);
    CHECK(n == 5 && v && !memcmp(v, "hello", 5));
    free(v);

    /* Views with different prefixes do not see each other's keys. */
    CHECK(plx__store_prefixed(a, "commA", &pa) == 0);
    CHECK(plx__store_prefixed(b, "commB", &pb) == 0);
    CHECK(plx__store_set(pa, "x", "1", 1) == 0);
    uint64_t t0 = plx__clock_ns();
    CHECK(plx__store_get(pb, "x", &v, &n, 200) == PLX_ERR_TIMEOUT);
    uint64_t ms = (plx__clock_ns() - t0) / 1000000;
    CHECK(ms >= 190 && ms < 2000);
    CHECK(strstr(plx_last_error(), "commB/x") != NULL);
    CHECK(plx__store_get(b, "commA/x", &v, &n, 200) == 0);
    free(v);

    /* add is atomic across threads */
    /* Hold the table open first so it outlives every thread's handle. */
    struct plx_store *c;
    CHECK(plx__store_open("mem://adders", 0, 1, 5000, &c) == 0);
    pthread_t th[4];
    for (int i = 0; i < 4; i++)
        pthread_create(&th[i], NULL, adder, NULL);
    for (int i = 0; i < 4; i++)
        pthread_join(th[i], NULL);
    int64_t total = 0;
    CHECK(plx__store_add(c, "counter", 0, &total) == 0);
    CHECK(total == 4000);
    const char *keys[] = {"done", "counter"};
    CHECK(plx__store_wait(c, keys, 2, 100) == 0);
    plx__store_release(c);

    plx__store_release(pa);
    plx__store_release(pb);
    plx__store_release(a);
    plx__store_release(b);
    if (failures)
        fprintf(stderr, "%d check(s) failed\n", failures);
    return failures ? 1 : 0;
}
