/* gloo2023_wire.c - the tcp plugin meets a rank that speaks gloo's 2023
 * rendezvous layout (Debian 13's and sid's libgloo; none on Debian 12, so
 * written out here from gloo's transport/tcp context.cc, device.cc and
 * listener.cc): its record under "<r>" (size_t host length, host, size_t
 * 136, the listener's 136-byte address, P pair identifiers), one listener
 * whose connections first write the 8-byte identifier of their pair, and
 * the dialing side chosen by address bytes, raw port values, identifiers.
 * The plexus ranks (threads, fake host store) must find that layout by
 * themselves, also among each other, and then exchange unbound-buffer
 * messages with the foreign rank frame by frame.
 * Cases: 2 ranks with plexus dialing or accepting, a lazy gloo rank (no
 * identifiers: the dialer writes its own rank), 3 ranks with the foreign
 * one dialing both or dialed by both.
 * Usage: gloo2023_wire PLUGIN.so */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fake_host.h"
#include "plexus/backend.h"

#define CHECK_DETAIL() fake_last_error()
#include "check.h"

static int failures;
static const struct plx_backend *B;

struct tcase {
    const char *name;
    int P, foreign;      /* world size, the foreign rank */
    const char *plx_ip;  /* where the plexus ranks listen */
    const char *gloo_ip; /* where the foreign rank listens */
    int ids;             /* the foreign rank publishes pair identifiers */
};

struct plx_rank {
    const struct tcase *t;
    struct plx_store *store;
    int rank, ok;
};

static unsigned char pat(int from, int to, size_t i)
{
    return (unsigned char)(from * 31 + to * 7 + i * 13);
}

static int filled(const unsigned char *b, size_t n, int from, int to)
{
    for (size_t i = 0; i < n; i++)
        if (b[i] != pat(from, to, i))
            return 0;
    return 1;
}

/* A plexus rank: 100 bytes to every peer on tag 7 (the foreign one), or 9
 * (plexus), 50 bytes back from the foreign one on tag 8. */
static void *plexus_main(void *arg)
{
    struct plx_rank *me = arg;
    const struct tcase *t = me->t;
    struct plx_comm_args a = {.struct_size = sizeof a, .rank = me->rank, .size = t->P, .local_rank = me->rank,
                              .local_size = t->P, .name = "g23", .store = me->store, .timeout_ms = 20000};
    void *c = NULL;
    if (B->comm_create(&a, &c)) {
        fprintf(stderr, "%s: plexus rank %d: comm_create: %s\n", t->name, me->rank, fake_last_error());
        return NULL;
    }
    unsigned char out[4][100], in[4][100];
    void *req[8];
    int n = 0, ok = 1;
    for (int p = 0; p < t->P; p++) {
        if (p == me->rank)
            continue;
        for (size_t i = 0; i < 100; i++)
            out[p][i] = pat(me->rank, p, i);
        size_t back = p == t->foreign ? 50 : 100;
        struct plx_p2p_args s = {.struct_size = sizeof s, .peer = p, .buf = out[p], .bytes = 100,
                                 .tag = p == t->foreign ? 7 : 9};
        struct plx_p2p_args r = {.struct_size = sizeof r, .peer = p, .buf = in[p], .bytes = back,
                                 .tag = p == t->foreign ? 8 : 9};
        ok &= B->isend(c, &s, &req[n++]) == 0 && B->irecv(c, &r, &req[n++]) == 0;
    }
    for (int k = 0; k < n; k++) {
        int rc = B->wait(c, req[k], 20000);
        if (rc)
            fprintf(stderr, "%s: plexus rank %d: wait: %s\n", t->name, me->rank, fake_last_error());
        ok &= rc == 0;
        B->req_free(c, req[k]);
    }
    for (int p = 0; p < t->P; p++)
        if (p != me->rank && !filled(in[p], p == t->foreign ? 50 : 100, p, me->rank)) {
            fprintf(stderr, "%s: plexus rank %d: wrong bytes from rank %d\n", t->name, me->rank, p);
            ok = 0;
        }
    B->comm_destroy(c);
    me->ok = ok;
    return NULL;
}

/* ---- the foreign rank ---------------------------------------------------- */

struct rec {
    struct sockaddr_in sa;
    int64_t ids[4];
    int nids;
};

static int get_rec(struct plx_store *s, int r, int P, struct rec *out)
{
    char key[16];
    void *v = NULL;
    size_t len = 0;
    snprintf(key, sizeof key, "%d", r);
    if (fake_host.store_get(s, key, &v, &len, 20000))
        return -1;
    uint64_t hl = 0, al = 0;
    const unsigned char *p = v;
    if (len >= 16)
        memcpy(&hl, p, 8);
    if (len >= 16 + hl)
        memcpy(&al, p + 8 + hl, 8);
    size_t ids = len - 16 - hl - al;
    int ok = len >= 16 + hl + al && al == 136 && (ids == 0 || ids == (size_t)P * 8);
    if (ok) {
        memcpy(&out->sa, p + 16 + hl, sizeof out->sa);
        out->nids = (int)(ids / 8);
        memcpy(out->ids, p + 16 + hl + al, ids);
    } else {
        fprintf(stderr, "rank %d published %zu bytes, not a gloo 2023 record for %d ranks\n", r, len, P);
    }
    free(v);
    return ok ? 0 : -1;
}

static void put_rec(struct plx_store *s, int r, int P, const struct sockaddr_in *sa, int ids)
{
    unsigned char buf[256] = {0};
    uint64_t hl = 8, al = 136;
    memcpy(buf, &hl, 8);
    memcpy(buf + 8, "gloohost", 8);
    memcpy(buf + 16, &al, 8);
    memcpy(buf + 24, sa, sizeof *sa);
    memset(buf + 24 + 128, 0xff, 8);
    for (int i = 0; ids && i < P; i++) {
        int64_t id = 100 + i; /* not the rank: the dialer must write what was published */
        memcpy(buf + 24 + 136 + 8 * i, &id, 8);
    }
    char key[16];
    snprintf(key, sizeof key, "%d", r);
    fake_host.store_set(s, key, buf, 24 + 136 + (ids ? 8 * (size_t)P : 0));
}

/* gloo's Device::isInitiator from the foreign rank's side. */
static int foreign_dials(const struct sockaddr_in *mine, int64_t my_seq, const struct sockaddr_in *theirs,
                         int64_t their_seq)
{
    int64_t rv = memcmp(&mine->sin_addr, &theirs->sin_addr, 4);
    if (!rv)
        rv = (int)mine->sin_port - (int)theirs->sin_port;
    if (!rv)
        rv = my_seq - their_seq;
    return rv > 0;
}

static int frame_out(int fd, uint64_t op, uint64_t slot, const void *data, size_t len)
{
    uint64_t h[6] = {48 + (op == 1 ? len : 0), op, slot, 0, len, 0};
    return write(fd, h, sizeof h) == (ssize_t)sizeof h && (op != 1 || write(fd, data, len) == (ssize_t)len) ? 0 : -1;
}

static int read_full(int fd, void *buf, size_t n)
{
    for (size_t got = 0; got < n;) {
        ssize_t k = read(fd, (char *)buf + got, n - got);
        if (k <= 0)
            return -1;
        got += (size_t)k;
    }
    return 0;
}

/* The unbound-buffer protocol with plexus rank p on fd: receive 100 bytes
 * on slot 7, send 50 on slot 8 once p's receive is announced. */
static int exchange(int fd, int me, int p)
{
    unsigned char back[50], got[100];
    for (size_t i = 0; i < 50; i++)
        back[i] = pat(me, p, i);
    if (frame_out(fd, 3, 7, NULL, 100) || frame_out(fd, 2, 8, NULL, 50))
        return -1;
    int have_data = 0, sent = 0;
    while (!have_data || !sent) {
        uint64_t h[6];
        if (read_full(fd, h, sizeof h))
            return -1;
        if (h[1] == 1 && h[2] == 7 && h[4] == 100 && read_full(fd, got, 100) == 0)
            have_data = filled(got, 100, p, me);
        else if (h[1] == 3 && h[2] == 8 && h[4] == 50)
            sent = frame_out(fd, 1, 8, back, 50) == 0;
        else if (!(h[1] == 2 && h[2] == 7 && h[4] == 100))
            return -1;
    }
    return 0;
}

/* Connects (or is connected to by) every plexus rank, then exchanges. */
static int foreign_main(const struct tcase *t, struct plx_store *s)
{
    int me = t->foreign, lfd = socket(AF_INET, SOCK_STREAM, 0), fds[4] = {-1, -1, -1, -1}, waiting = 0;
    struct sockaddr_in sa = {.sin_family = AF_INET};
    socklen_t sl = sizeof sa;
    inet_pton(AF_INET, t->gloo_ip, &sa.sin_addr);
    if (bind(lfd, (struct sockaddr *)&sa, sizeof sa) || listen(lfd, 8) || getsockname(lfd, (struct sockaddr *)&sa, &sl))
        return -1;
    put_rec(s, me, t->P, &sa, t->ids);
    for (int p = 0; p < t->P; p++) {
        struct rec r;
        if (p == me || get_rec(s, p, t->P, &r))
            continue;
        CHECK(r.nids == t->P && r.ids[me] == me); /* plexus names its pairs by rank */
        if (!foreign_dials(&sa, t->ids ? 100 + p : p, &r.sa, r.ids[me])) {
            waiting++;
            continue;
        }
        fds[p] = socket(AF_INET, SOCK_STREAM, 0);
        int64_t seq = r.ids[me];
        CHECK(connect(fds[p], (struct sockaddr *)&r.sa, sizeof r.sa) == 0 && write(fds[p], &seq, 8) == 8);
        printf("%s: the foreign rank dialed plexus rank %d\n", t->name, p);
    }
    for (; waiting > 0; waiting--) {
        int fd = accept(lfd, NULL, NULL);
        int64_t seq = -1;
        CHECK(fd >= 0 && read_full(fd, &seq, 8) == 0);
        int p = t->ids ? (int)seq - 100 : (int)seq; /* what this rank published, or (lazy) the dialer's rank */
        CHECK(p >= 0 && p < t->P && p != me && fds[p] < 0);
        if (p >= 0 && p < t->P && p != me && fds[p] < 0)
            fds[p] = fd;
        printf("%s: plexus rank %d dialed the foreign rank, naming pair %lld\n", t->name, p, (long long)seq);
    }
    close(lfd);
    int rc = 0;
    for (int p = 0; p < t->P; p++)
        if (p != me) {
            rc |= fds[p] < 0 || exchange(fds[p], me, p);
            if (fds[p] >= 0)
                close(fds[p]);
        }
    return rc;
}

static void run_case(const struct tcase *t)
{
    struct plx_store *s = fake_store_new();
    setenv("PLEXUS_TCP_ADDRESS", t->plx_ip, 1);
    struct plx_rank ranks[4];
    pthread_t th[4];
    for (int r = 0; r < t->P; r++) {
        ranks[r] = (struct plx_rank){.t = t, .store = s, .rank = r};
        if (r != t->foreign)
            pthread_create(&th[r], NULL, plexus_main, &ranks[r]);
    }
    int rc = foreign_main(t, s);
    CHECK(rc == 0);
    for (int r = 0; r < t->P; r++)
        if (r != t->foreign) {
            pthread_join(th[r], NULL);
            CHECK(ranks[r].ok);
        }
    printf("%s: %s\n", t->name, rc == 0 ? "ok" : "FAILED");
    fake_store_free(s);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: gloo2023_wire PLUGIN.so\n");
        return 2;
    }
    alarm(120);
    B = fake_load(argv[1]);
    static const struct tcase cases[] = {
        {"plexus dials", 2, 1, "127.0.0.2", "127.0.0.1", 1},
        {"plexus accepts", 2, 0, "127.0.0.1", "127.0.0.2", 1},
        {"lazy gloo, plexus dials", 2, 0, "127.0.0.2", "127.0.0.1", 0},
        {"3 ranks, both plexus dial", 3, 2, "127.0.0.2", "127.0.0.1", 1},
        {"3 ranks, the foreign one dials", 3, 0, "127.0.0.1", "127.0.0.2", 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        run_case(&cases[i]);
    printf(failures ? "FAILED\n" : "ok\n");
    return failures ? 1 : 0;
}
