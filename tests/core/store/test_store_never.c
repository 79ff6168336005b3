/* test_store_never.c - "no deadline" means no deadline: a tcp:// store client
 * opened with PLX_TIMEOUT_INFINITE waits for a server that comes up later
 * instead of failing at its first refused connection; one with a deadline
 * and no server ever gives up then, saying nothing listened (every
 * attempt was refused), not "no answer: a firewall"; and the clock's
 * deadline helper spells "never" one way (plx__deadline_ms), the plugin
 * SDK's (plx_plugin_deadline) the same way. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "plexus/plexus.h"
#include "plexus/plugin.h"
#include "check.h"
#include "clock.h"
#include "store.h"
#include "store_tcp.h"

static int failures;
static int port;
static struct plx__store_server *srv;

/* A port nobody listens on now (the server takes it a second later). */
static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t n = sizeof a;
    CHECK(fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 && getsockname(fd, (struct sockaddr *)&a, &n) == 0);
    close(fd);
    return ntohs(a.sin_port);
}

static void *late_server(void *arg)
{
    (void)arg;
    sleep(1);
    int bound = 0;
    CHECK(plx__store_server_start("127.0.0.1", port, &srv, &bound) == 0);
    return NULL;
}

int main(void)
{
    uint64_t now = plx__clock_ns();
    CHECK(plx__deadline_ms(PLX_TIMEOUT_INFINITE) == PLX__NEVER);
    CHECK(plx__deadline_ms(INT64_MAX) == PLX__NEVER); /* saturates, never wraps into the past */
    CHECK(plx__deadline_ms(-1) <= plx__clock_ns());   /* any other negative value: already passed */
    uint64_t d = plx__deadline_ms(5000);
    CHECK(d >= now + 5000000000u && d < plx__clock_ns() + 6000000000u);
    /* ... and turns back into a timeout the same way */
    CHECK(plx__ms_left(PLX__NEVER) == PLX_TIMEOUT_INFINITE);
    CHECK(plx__ms_left(plx__clock_ns() - 1) == 1); /* passed: one more look */
    int64_t left = plx__ms_left(d);
    CHECK(left > 4000 && left <= 5000);
    /* The SDK's rule is the core's: a plugin handed any of these timeouts
     * waits as the core would. */
    CHECK(plx_plugin_deadline(PLX_TIMEOUT_INFINITE) == PLX_DEADLINE_NEVER);
    CHECK(plx_plugin_deadline(INT64_MAX) == PLX_DEADLINE_NEVER);
    CHECK(plx_plugin_deadline(-1) <= plx__clock_ns());
    CHECK(plx_plugin_deadline(0) <= plx__clock_ns());
    d = plx_plugin_deadline(5000);
    CHECK(d >= now + 5000000000u && d < plx__clock_ns() + 6000000000u);

    /* No server, ever: refused until the deadline, reported as such. */
    char never[64];
    snprintf(never, sizeof never, "tcp://127.0.0.1:%d", free_port());
    struct plx_store *none = NULL;
    uint64_t t0 = plx__clock_ns();
    CHECK(plx__store_open(never, 1, 2, 300, &none) == PLX_ERR_TIMEOUT && !none);
    CHECK(plx__clock_ns() - t0 >= 250000000u);
    const char *why = plx_last_error();
    CHECK(strstr(why, "Connection refused") && strstr(why, "nothing listened there") && !strstr(why, "firewall"));
    if (!strstr(why, "nothing listened there"))
        printf("said: %s\n", why);

    port = free_port();
    pthread_t t;
    CHECK(pthread_create(&t, NULL, late_server, NULL) == 0);
    char url[64];
    snprintf(url, sizeof url, "tcp://127.0.0.1:%d", port);
    struct plx_store *s = NULL;
    int rc = plx__store_open(url, 1, 2, PLX_TIMEOUT_INFINITE, &s);
    CHECK(rc == 0);
    void *v = NULL;
    size_t len = 0;
    if (rc == 0) {
        CHECK(plx__store_set(s, "k", "v1", 2) == 0);
        CHECK(plx__store_get(s, "k", &v, &len, PLX_TIMEOUT_INFINITE) == 0 && len == 2 && !memcmp(v, "v1", 2));
        free(v);
        plx__store_release(s);
    }
    pthread_join(t, NULL);
    if (srv)
        plx__store_server_stop(srv);
    printf("%s\n", failures ? "FAILED" : "no deadline waits for a late store server");
    return failures != 0;
}
