/* test_auth.c - the tcp plugin's authenticated connect phase, driven
 * directly (fake host, ranks as threads). Cases:
 *   listener  strangers knock on a rank's pair listener first (Gloo's plain
 *             protocol, a made-up proof, a good secret for another pair, a
 *             silent one): each is refused and logged with its address, the
 *             silent one after [tcp] auth_timeout_ms; then the real peer,
 *             authenticated, gets the pair.
 *   dialer    the listener a rank dials proves another secret: refused.
 *   silent    the listener a rank dials never answers: a bounded error.
 *   flood     more silent strangers than [tcp] max_handshakes: the rest
 *             wait in the backlog, and the real peer still gets in.
 *   job       three real ranks and a stranger on every listener before the
 *             last rank starts: the job connects and exchanges checked data.
 * Listener or dialer is forced with [tcp] address: the larger address dials.
 * Usage: test_auth PLUGIN.so CASE */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "auth.h"
#include "fake_host.h"
#define CHECK_DETAIL() fake_last_error()
#include "check.h"

static const struct plx_backend *B;
static int failures;
static FILE *logf;
static int real_stderr;
static const char *SECRET = "tcp-test-secret-0123456789abcdef";

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int logged(const char *a, const char *b)
{
    char line[1024];
    for (double t0 = now_ms(); now_ms() - t0 < 3000; usleep(10000)) {
        fflush(stderr);
        rewind(logf);
        while (fgets(line, sizeof line, logf))
            if (strstr(line, a) && (!b || strstr(line, b)))
                return 1;
    }
    dprintf(real_stderr, "no log line with '%s' and '%s'\n", a, b ? b : "");
    return 0;
}

/* The same, without waiting: for a line written before a close we saw. */
static int logged_now(const char *a, const char *b)
{
    char line[1024];
    fflush(stderr);
    rewind(logf);
    while (fgets(line, sizeof line, logf))
        if (strstr(line, a) && strstr(line, b))
            return 1;
    return 0;
}

struct rank {
    struct plx_store *st;
    int rank, size, rc;
    void *c;
    atomic_int *go; /* wait for it before starting, if set */
    char err[512];
};

static void *rank_create(void *p)
{
    struct rank *r = p;
    while (r->go && !atomic_load(r->go))
        usleep(1000);
    struct plx_comm_args a = {.struct_size = sizeof a, .rank = r->rank, .size = r->size, .local_rank = r->rank,
                              .local_size = r->size, .name = "t", .store = r->st, .timeout_ms = 10000};
    r->rc = B->comm_create(&a, &r->c);
    snprintf(r->err, sizeof r->err, "%s", fake_last_error());
    return NULL;
}

/* Connect to sa; addr gets the local "ip:port" the plugin logs. */
static int knock(const struct sockaddr_in *sa, char *addr, size_t n)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(fd, (const struct sockaddr *)sa, sizeof *sa)) {
        close(fd);
        return -1;
    }
    struct sockaddr_in me;
    socklen_t sl = sizeof me;
    getsockname(fd, (struct sockaddr *)&me, &sl);
    snprintf(addr, n, "127.0.0.1:%d", ntohs(me.sin_port));
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

/* Publish a fake rank 1 at ip:port (no eager marker: plain Gloo to the plugin). */
static void publish_fake(struct plx_store *st, const struct sockaddr_in *me)
{
    unsigned char blob[136];
    memset(blob, 0, sizeof blob);
    memcpy(blob, me, sizeof *me);
    memset(blob + 128, 0xff, 8);
    fake_host.store_set(st, "rank_1", "fakehost", 8);
    fake_host.store_set(st, "1", blob, sizeof blob);
}

static int listen_on(const char *ip, struct sockaddr_in *sa)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    socklen_t sl = sizeof *sa;
    *sa = (struct sockaddr_in){.sin_family = AF_INET};
    inet_pton(AF_INET, ip, &sa->sin_addr);
    if (bind(fd, (struct sockaddr *)sa, sizeof *sa) || listen(fd, 4) || getsockname(fd, (struct sockaddr *)sa, &sl)) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Slice `which` of rank r's published address list. */
static int peer_addr(struct plx_store *st, int r, int which, struct sockaddr_in *out)
{
    char key[16];
    void *v = NULL;
    size_t len = 0;
    snprintf(key, sizeof key, "%d", r);
    if (fake_host.store_get(st, key, &v, &len, 5000) || len < (size_t)(which + 1) * 136) {
        free(v);
        return -1;
    }
    memcpy(out, (unsigned char *)v + which * 136, sizeof *out);
    free(v);
    return 0;
}

static int case_listener(void)
{
    setenv("PLEXUS_TCP_ADDRESS", "127.0.0.1", 1);
    struct rank r0 = {.st = fake_store_new(), .rank = 0, .size = 2};
    struct sockaddr_in fake, lsn;
    int unused = listen_on("127.0.0.2", &fake); /* published, never dialed: rank 0 listens */
    CHECK(unused >= 0);
    publish_fake(r0.st, &fake);
    pthread_t th;
    pthread_create(&th, NULL, rank_create, &r0);
    CHECK(peer_addr(r0.st, 0, 0, &lsn) == 0);

    char a_plain[64], a_mac[64], a_pair[64], a_silent[64];
    int plain = knock(&lsn, a_plain, sizeof a_plain);
    uint64_t gloo_hdr[6] = {48, 3, 7, 0, 16, 0}; /* a Gloo NOTIFY_RECV_READY */
    CHECK(send(plain, gloo_hdr, sizeof gloo_hdr, 0) == sizeof gloo_hdr);
    int mac = knock(&lsn, a_mac, sizeof a_mac);
    unsigned char buf[72];
    memcpy(buf, "PLXAUTH1", 8);
    plx__auth_random(buf + 8, 64); /* a nonce, and a proof made up */
    CHECK(send(mac, buf, 72, 0) == 72);
    int pair = knock(&lsn, a_pair, sizeof a_pair); /* the secret, but as rank 2 of another pair */
    struct plx__auth h;
    plx__auth_init(&h, PLX__AUTH_CLIENT, SECRET, "tcp/t/2->0");
    CHECK(plx__auth_run(&h, pair, (uint64_t)(now_ms() + 3000) * 1000000u) == -1);
    CHECK(strstr(h.why, "proof is wrong") != NULL);
    close(pair);
    double t0 = now_ms();
    int silent = knock(&lsn, a_silent, sizeof a_silent);

    CHECK(until_closed(plain, 2000) >= 0);
    CHECK(until_closed(mac, 2000) >= 0);
    double t = until_closed(silent, 3000);
    CHECK(t >= 0 && now_ms() - t0 >= 250);
    printf("silent connection dropped after %.0f ms\n", now_ms() - t0);
    CHECK(logged(a_plain, "not a plexus authentication hello"));
    CHECK(logged(a_mac, "wrong proof (MAC)"));
    CHECK(logged(a_pair, "closed by the client before it authenticated"));
    CHECK(logged(a_silent, "not authenticated within 300 ms"));

    /* The real rank 1 now: authenticated, it gets the pair. */
    char a_real[64];
    int real = knock(&lsn, a_real, sizeof a_real);
    plx__auth_init(&h, PLX__AUTH_CLIENT, SECRET, "tcp/t/1->0");
    CHECK(plx__auth_run(&h, real, (uint64_t)(now_ms() + 5000) * 1000000u) == 1);
    pthread_join(th, NULL);
    CHECK(r0.rc == 0);
    if (r0.rc == 0) { /* the pair is live: a send announces itself with SEND_READY */
        int v = 42;
        void *req = NULL;
        struct plx_p2p_args pa = {.struct_size = sizeof pa, .peer = 1, .buf = &v, .bytes = 4, .tag = 8};
        CHECK(B->isend(r0.c, &pa, &req) == 0);
        uint64_t hdr[6] = {0};
        struct timeval tv = {5, 0};
        setsockopt(real, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        CHECK(recv(real, hdr, sizeof hdr, MSG_WAITALL) == sizeof hdr && hdr[1] == 2 && hdr[2] == 8 && hdr[4] == 4);
        B->req_free(r0.c, req);
        B->comm_destroy(r0.c);
    }
    close(plain);
    close(mac);
    close(silent);
    close(real);
    close(unused);
    fake_store_free(r0.st);
    return 0;
}

/* max_handshakes = 2 and four silent strangers ahead of the real peer:
 * they are served two at a time, each pair dropped after 300 ms, then the
 * peer (waiting in the backlog, its hello already sent) gets in. */
static int case_flood(void)
{
    setenv("PLEXUS_TCP_ADDRESS", "127.0.0.1", 1);
    setenv("PLEXUS_TCP_MAX_HANDSHAKES", "2", 1);
    struct rank r0 = {.st = fake_store_new(), .rank = 0, .size = 2};
    struct sockaddr_in fake, lsn;
    int unused = listen_on("127.0.0.2", &fake);
    publish_fake(r0.st, &fake);
    pthread_t th;
    pthread_create(&th, NULL, rank_create, &r0);
    CHECK(peer_addr(r0.st, 0, 0, &lsn) == 0);
    char addr[5][64];
    int fds[4];
    double t0 = now_ms();
    for (int i = 0; i < 4; i++)
        fds[i] = knock(&lsn, addr[i], sizeof addr[i]);
    int real = knock(&lsn, addr[4], sizeof addr[4]);
    struct plx__auth h;
    plx__auth_init(&h, PLX__AUTH_CLIENT, SECRET, "tcp/t/1->0");
    CHECK(plx__auth_run(&h, real, (uint64_t)(now_ms() + 5000) * 1000000u) == 1);
    double t = now_ms() - t0;
    pthread_join(th, NULL);
    printf("real peer in after %.0f ms behind 4 silent strangers\n", t);
    CHECK(r0.rc == 0);
    CHECK(t >= 500); /* two rounds of two 300 ms timeouts */
    CHECK(logged("max_handshakes", NULL));
    /* Each stranger is dropped with its address logged: by its timeout, or
     * (one that shares the last round with the real peer) once the peer is
     * in. The first round of two can only end by timeout. */
    int timed_out = 0;
    for (int i = 0; i < 4; i++) {
        CHECK(until_closed(fds[i], 3000) >= 0);
        int t_out = logged_now(addr[i], "not authenticated within 300 ms");
        timed_out += t_out;
        CHECK(t_out || logged_now(addr[i], "rank 1 has connected"));
        close(fds[i]);
    }
    CHECK(timed_out >= 2);
    if (r0.rc == 0)
        B->comm_destroy(r0.c);
    close(real);
    close(unused);
    unsetenv("PLEXUS_TCP_MAX_HANDSHAKES");
    fake_store_free(r0.st);
    return 0;
}

/* Rank 0 (127.0.0.2) dials the fake rank 1 (127.0.0.1), which answers with
 * another secret, or not at all. */
static int case_dialer(int silent)
{
    setenv("PLEXUS_TCP_ADDRESS", "127.0.0.2", 1);
    setenv("PLEXUS_TCP_CONNECT_TIMEOUT_MS", "1500", 1);
    struct rank r0 = {.st = fake_store_new(), .rank = 0, .size = 2};
    struct sockaddr_in fake;
    int lfd = listen_on("127.0.0.1", &fake);
    CHECK(lfd >= 0);
    publish_fake(r0.st, &fake);
    double t0 = now_ms();
    pthread_t th;
    pthread_create(&th, NULL, rank_create, &r0);
    struct pollfd pf = {lfd, POLLIN, 0};
    CHECK(poll(&pf, 1, 5000) == 1);
    int fd = accept(lfd, NULL, NULL);
    if (!silent) {
        struct plx__auth h;
        plx__auth_init(&h, PLX__AUTH_SERVER, "some-other-secret-fedcba9876543210", "tcp/t/0->1");
        CHECK(plx__auth_run(&h, fd, (uint64_t)(now_ms() + 5000) * 1000000u) == -1);
    }
    pthread_join(th, NULL);
    double t = now_ms() - t0;
    printf("comm_create: %d after %.0f ms: %s\n", r0.rc, t, r0.err);
    if (silent) {
        CHECK(r0.rc == PLX_ERR_TIMEOUT && strstr(r0.err, "waiting for the listener's challenge"));
        CHECK(t < 5000);
    } else {
        CHECK(r0.rc == PLX_ERR_AUTH && strstr(r0.err, "cannot authenticate to rank 1") &&
              strstr(r0.err, "proof is wrong"));
        CHECK(t < 1500);
    }
    if (r0.rc == 0)
        B->comm_destroy(r0.c);
    close(fd);
    close(lfd);
    unsetenv("PLEXUS_TCP_CONNECT_TIMEOUT_MS");
    fake_store_free(r0.st);
    return 0;
}

struct stranger {
    struct plx_store *st;
    atomic_int *go;
    int fds[12], n;
    char addr[12][64];
};

/* Three strangers on each listener of ranks 0 and 1, then rank 2 may start. */
static void *stranger_main(void *p)
{
    struct stranger *s = p;
    for (int r = 0; r < 2; r++)
        for (int which = 0; which < 2; which++) {
            struct sockaddr_in sa;
            if (peer_addr(s->st, r, which, &sa))
                continue;
            for (int kind = 0; kind < 3; kind++) {
                int fd = knock(&sa, s->addr[s->n], sizeof s->addr[s->n]);
                if (fd < 0)
                    continue;
                unsigned char buf[72];
                if (kind == 0) { /* Gloo's protocol */
                    uint64_t hdr[6] = {48, 3, 7, 0, 16, 0};
                    send(fd, hdr, sizeof hdr, 0);
                } else if (kind == 1) { /* a made-up proof */
                    memcpy(buf, "PLXAUTH1", 8);
                    plx__auth_random(buf + 8, 64);
                    send(fd, buf, 72, 0);
                } /* kind 2: silent */
                s->fds[s->n++] = fd;
            }
        }
    atomic_store(s->go, 1);
    return NULL;
}

static int case_job(void)
{
    unsetenv("PLEXUS_TCP_ADDRESS");
    /* The strangers knock on gloo 2022's per-pair listeners, and rank 2
     * starts only after the others published theirs (auto would wait). */
    setenv("PLEXUS_TCP_GLOO_WIRE", "2022", 1);
    struct plx_store *st = fake_store_new();
    atomic_int go = 0;
    struct rank r[3];
    pthread_t th[3], sth;
    struct stranger s = {.st = st, .go = &go};
    for (int i = 0; i < 3; i++) {
        r[i] = (struct rank){.st = st, .rank = i, .size = 3, .go = i == 2 ? &go : NULL};
        pthread_create(&th[i], NULL, rank_create, &r[i]);
    }
    pthread_create(&sth, NULL, stranger_main, &s);
    pthread_join(sth, NULL);
    for (int i = 0; i < 3; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < 3; i++) {
        CHECK(r[i].rc == 0);
        if (r[i].rc)
            fprintf(stderr, "rank %d: %s\n", i, r[i].err);
    }
    CHECK(s.n >= 9); /* the dialing side of pair 0-1 may have closed its listener already */
    if (!r[0].rc && !r[1].rc && !r[2].rc) { /* every pair exchanges checked data */
        int out[3][3], in[3][3];
        void *req[3][6];
        for (int i = 0; i < 3; i++)
            for (int j = 0, k = 0; j < 3; j++) {
                if (i == j)
                    continue;
                out[i][j] = 1000 * i + j;
                in[i][j] = -1;
                struct plx_p2p_args sa = {.struct_size = sizeof sa, .peer = j, .buf = &out[i][j], .bytes = 4, .tag = 5};
                struct plx_p2p_args ra = {.struct_size = sizeof ra, .peer = j, .buf = &in[i][j], .bytes = 4, .tag = 5};
                CHECK(B->isend(r[i].c, &sa, &req[i][k++]) == 0);
                CHECK(B->irecv(r[i].c, &ra, &req[i][k++]) == 0);
            }
        for (int i = 0; i < 3; i++)
            for (int k = 0; k < 4; k++) {
                CHECK(B->wait(r[i].c, req[i][k], 5000) == 0);
                B->req_free(r[i].c, req[i][k]);
            }
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 3; j++)
                if (i != j)
                    CHECK(in[i][j] == 1000 * j + i);
        for (int i = 0; i < 3; i++)
            B->comm_destroy(r[i].c);
    }
    /* Every stranger was shut out; on the listeners that were the pair's
     * listening side (the one of ranks 0-1 for sure) with a logged reason. */
    int plain_logged = 0, mac_logged = 0;
    for (int i = 0; i < s.n; i++) {
        CHECK(until_closed(s.fds[i], 3000) >= 0);
        close(s.fds[i]);
    }
    char line[1024];
    fflush(stderr);
    rewind(logf);
    while (fgets(line, sizeof line, logf))
        for (int i = 0; i < s.n; i++)
            if (strstr(line, s.addr[i])) {
                plain_logged += strstr(line, "not a plexus authentication hello") != NULL;
                mac_logged += strstr(line, "wrong proof (MAC)") != NULL;
            }
    printf("strangers: %d; refusals logged: %d plain, %d wrong MAC\n", s.n, plain_logged, mac_logged);
    CHECK(plain_logged >= 1 && mac_logged >= 1);
    fake_store_free(st);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: test_auth PLUGIN.so listener|dialer|silent|flood|job\n");
        return 2;
    }
    B = fake_load(argv[1]);
    real_stderr = dup(2);
    logf = tmpfile();
    if (!logf || dup2(fileno(logf), 2) < 0) {
        printf("cannot capture stderr: skipping\n");
        return 77;
    }
    setvbuf(stderr, NULL, _IONBF, 0);
    setenv(PLX__AUTH_ENV, SECRET, 1);
    setenv("PLEXUS_TCP_AUTH_TIMEOUT_MS", "300", 1);
    unsetenv("PLEXUS_TCP_AUTH");
    if (!strcmp(argv[2], "listener"))
        case_listener();
    else if (!strcmp(argv[2], "dialer"))
        case_dialer(0);
    else if (!strcmp(argv[2], "silent"))
        case_dialer(1);
    else if (!strcmp(argv[2], "flood"))
        case_flood();
    else if (!strcmp(argv[2], "job"))
        case_job();
    else
        return 2;
    fflush(stderr);
    rewind(logf);
    char line[1024];
    while (fgets(line, sizeof line, logf))
        dprintf(real_stderr, "%s", line);
    printf("%s\n", failures ? "FAILED" : "ok");
    return failures != 0;
}
