/* intruder.c - knocks on a running job's doors without its secret, for
 * auth_job.sh. Usage: intruder PORT GOFILE
 *
 * Store (127.0.0.1:PORT): a plain TCPStore client (no secret) must lose its
 * connection, a client with another secret must get PLX_ERR_AUTH, a silent
 * connection must be dropped after [core] auth_timeout_ms.
 * Transport: the listeners of ranks 0 and 1 are read from the store with the
 * job's secret (addresses are no secret: a port scan finds them too), then
 * each gets three strangers (Gloo's plain protocol, a made-up proof, silence)
 * before GOFILE lets rank 2 start. Every stranger must be shut out.
 * Exit 0 when every door held. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "auth.h"
#include "error.h"
#include "store.h"
#include "check.h"

static int failures;

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int knock(const struct sockaddr_in *sa)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(fd, (const struct sockaddr *)sa, sizeof *sa)) {
        close(fd);
        return -1;
    }
    return fd;
}

static double until_closed(int fd, int limit_ms)
{
    double t0 = now_ms();
    char buf[256];
    for (;;) {
        int left = limit_ms - (int)(now_ms() - t0);
        struct pollfd pf = {fd, POLLIN, 0};
        if (left <= 0 || poll(&pf, 1, left) <= 0)
            return -1;
        if (recv(fd, buf, sizeof buf, 0) <= 0)
            return now_ms() - t0;
    }
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: intruder PORT GOFILE\n");
        return 2;
    }
    const char *env = getenv(PLX__AUTH_ENV), *go = argv[2];
    const char *tmo = getenv("PLEXUS_CORE_AUTH_TIMEOUT_MS");
    int auth_ms = tmo ? atoi(tmo) : 10000;
    if (!env) {
        fprintf(stderr, "intruder: the job's %s must be set\n", PLX__AUTH_ENV);
        return 2;
    }
    char secret[256], url[64];
    snprintf(secret, sizeof secret, "%s", env);
    snprintf(url, sizeof url, "tcp://127.0.0.1:%s", argv[1]);
    struct sockaddr_in store = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[1])),
                                .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int fd = -1;
    for (double t0 = now_ms(); fd < 0 && now_ms() - t0 < 30000; usleep(20000))
        fd = knock(&store);
    CHECKF(fd >= 0, "the job's store never came up");
    if (fd < 0)
        return 1;
    close(fd);

    /* 1. torch's client, no secret: it may connect, but never gets an answer. */
    unsetenv(PLX__AUTH_ENV);
    struct plx_store *s = NULL;
    int rc = plx__store_open(url, 1, 3, 3000, &s);
    if (rc == 0) {
        void *v = NULL;
        size_t n = 0;
        rc = plx__store_get(s, "world/0", &v, &n, 3000);
        free(v);
        plx__store_release(s);
    }
    CHECKF(rc != 0, "a client without the secret read the job's store");
    printf("store, no secret: %s: %s\n", plx_err_name(rc), plx_last_error());

    /* 2. another secret: the handshake fails. */
    setenv(PLX__AUTH_ENV, "not-the-job-secret-0123456789abcdef", 1);
    s = NULL;
    rc = plx__store_open(url, 1, 3, 3000, &s);
    CHECKF(rc == PLX_ERR_AUTH, "a client with another secret got %d", rc);
    printf("store, wrong secret: %s: %s\n", plx_err_name(rc), plx_last_error());
    if (rc == 0)
        plx__store_release(s);

    /* 3. silence: dropped after the handshake timeout. */
    fd = knock(&store);
    double t = fd >= 0 ? until_closed(fd, auth_ms + 10000) : -1;
    CHECKF(t >= auth_ms * 0.8, "a silent store connection was closed after %.0f ms (limit %d)", t, auth_ms);
    printf("store, silent: dropped after %.0f ms\n", t);
    if (fd >= 0)
        close(fd);

    /* 4. the transport listeners of ranks 0 and 1 (rank 2 waits for GOFILE). */
    setenv(PLX__AUTH_ENV, secret, 1);
    s = NULL;
    int fds[16], n = 0;
    CHECKF(plx__store_open(url, 1, 3, 5000, &s) == 0, "cannot open the store with the job's secret: %s",
           plx_last_error());
    for (int r = 0; s && r < 2; r++) {
        char key[16];
        void *v = NULL;
        size_t len = 0;
        snprintf(key, sizeof key, "world/%d", r);
        if (plx__store_get(s, key, &v, &len, 20000) || len != 2 * 136) {
            CHECKF(0, "no address list under %s (%zu bytes): %s", key, len, plx_last_error());
            free(v);
            continue;
        }
        for (int which = 0; which < 2; which++) {
            struct sockaddr_in sa;
            memcpy(&sa, (unsigned char *)v + which * 136, sizeof sa);
            for (int kind = 0; kind < 3; kind++) {
                int k = knock(&sa);
                if (k < 0)
                    continue;
                unsigned char buf[72];
                if (kind == 0) {
                    uint64_t hdr[6] = {48, 3, 7, 0, 16, 0}; /* Gloo NOTIFY_RECV_READY */
                    send(k, hdr, sizeof hdr, 0);
                } else if (kind == 1) {
                    memcpy(buf, "PLXAUTH1", 8);
                    plx__auth_random(buf + 8, 64);
                    send(k, buf, sizeof buf, 0);
                }
                fds[n++] = k;
            }
        }
        free(v);
    }
    if (s)
        plx__store_release(s);
    printf("transport: %d strangers on the listeners of ranks 0 and 1\n", n);
    /* The dialing side of pair 0-1 closes its listener as soon as it has
     * rank 1's address; the other listeners wait for rank 2. */
    CHECKF(n >= 9, "only %d of 12 stranger connections were made", n);
    FILE *f = fopen(go, "w");
    if (f)
        fclose(f);
    for (int i = 0; i < n; i++) {
        CHECKF(until_closed(fds[i], 60000) >= 0, "stranger %d was never shut out", i);
        close(fds[i]);
    }
    printf("%s\n", failures ? "intruder: some doors were open" : "intruder: every door held");
    return failures != 0;
}
