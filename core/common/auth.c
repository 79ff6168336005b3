/* auth.c - the handshake of auth.h: a small state machine over a socket,
 * HMAC-SHA256 and nonces from libsodium, nothing hand-written. */
#include "auth.h"

#include <errno.h>
#include <poll.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>

static const char magic[8] = {'P', 'L', 'X', 'A', 'U', 'T', 'H', '1'};

enum {
    C_SEND_HELLO, C_READ_CHALLENGE, C_SEND_PROOF, C_READ_ACK,
    S_READ_HELLO, S_SEND_CHALLENGE, S_READ_PROOF, S_SEND_ACK,
    DONE, FAILED,
};

static const char *const step_names[] = {
    "sending its hello", "waiting for the listener's challenge", "sending its proof", "waiting for the listener's ack",
    "waiting for the client's hello", "sending the challenge", "waiting for the client's proof", "sending the ack",
    "done", "failed",
};

int plx__auth_secret_ok(const char *secret, char *why, size_t why_len)
{
    size_t n = secret ? strlen(secret) : 0;
    if (n < PLX__AUTH_MIN_SECRET) {
        snprintf(why, why_len, "%s has %zu characters; at least %d are needed (plexus-run generates one)",
                 PLX__AUTH_ENV, n, PLX__AUTH_MIN_SECRET);
        return -1;
    }
    return 0;
}

int plx__auth_policy(const char *section, const char *mode, const char *secret, const char **use, char *why,
                     size_t why_len)
{
    *use = NULL;
    if (mode && !strcasecmp(mode, "off")) {
        snprintf(why, why_len, "[%s] auth = off", section);
        return 0;
    }
    if (!secret || !*secret) {
        if (mode && !strcasecmp(mode, "on")) {
            snprintf(why, why_len, "[%s] auth = on, but %s is not set (plexus-run sets one)", section,
                     PLX__AUTH_ENV);
            return -1;
        }
        snprintf(why, why_len, "no %s in the environment (plexus-run sets one; --no-auth leaves it out)",
                 PLX__AUTH_ENV);
        return 0;
    }
    if (plx__auth_secret_ok(secret, why, why_len))
        return -1;
    snprintf(why, why_len, "it proves %s", PLX__AUTH_ENV);
    *use = secret;
    return 0;
}

void plx__auth_random(void *buf, size_t n)
{
    if (sodium_init() < 0) {
        memset(buf, 0, n); /* callers check sodium_init through plx__auth_init first */
        return;
    }
    randombytes_buf(buf, n);
}

/* HMAC-SHA256(secret, label | u32 len(ctx) | ctx | Nc | Ns). */
static void mac(const struct plx__auth *a, const char *role, unsigned char out[PLX__AUTH_MAC])
{
    crypto_auth_hmacsha256_state st;
    char label[32];
    int ll = snprintf(label, sizeof label, "plexus-auth/1 %s", role);
    uint32_t cl = (uint32_t)strlen(a->ctx);
    unsigned char clb[4] = {(unsigned char)(cl >> 24), (unsigned char)(cl >> 16), (unsigned char)(cl >> 8),
                            (unsigned char)cl};
    crypto_auth_hmacsha256_init(&st, (const unsigned char *)a->secret, a->secret_len);
    crypto_auth_hmacsha256_update(&st, (const unsigned char *)label, (unsigned long long)ll);
    crypto_auth_hmacsha256_update(&st, clb, sizeof clb);
    crypto_auth_hmacsha256_update(&st, (const unsigned char *)a->ctx, cl);
    crypto_auth_hmacsha256_update(&st, a->nc, sizeof a->nc);
    crypto_auth_hmacsha256_update(&st, a->ns, sizeof a->ns);
    crypto_auth_hmacsha256_final(&st, out);
    sodium_memzero(&st, sizeof st);
}

static int fail(struct plx__auth *a, const char *why)
{
    snprintf(a->why, sizeof a->why, "%s", why);
    a->step = FAILED;
    return -1;
}

static void expect(struct plx__auth *a, int step, size_t n)
{
    a->step = step;
    a->need = n;
    a->got = 0;
}

static void queue(struct plx__auth *a, int step, const void *d, size_t n)
{
    memcpy(a->out, d, n);
    a->out_len = n;
    a->out_sent = 0;
    a->step = step;
}

int plx__auth_init(struct plx__auth *a, int role, const char *secret, const char *ctx)
{
    memset(a, 0, sizeof *a);
    a->role = role;
    a->secret = secret;
    a->secret_len = secret ? strlen(secret) : 0;
    snprintf(a->ctx, sizeof a->ctx, "%s", ctx ? ctx : "");
    if (sodium_init() < 0) {
        fail(a, "libsodium cannot initialise");
        return -1;
    }
    if (role == PLX__AUTH_CLIENT) {
        unsigned char hello[PLX__AUTH_HELLO_BYTES];
        randombytes_buf(a->nc, sizeof a->nc);
        memcpy(hello, magic, sizeof magic);
        memcpy(hello + sizeof magic, a->nc, sizeof a->nc);
        queue(a, C_SEND_HELLO, hello, sizeof hello);
    } else {
        expect(a, S_READ_HELLO, PLX__AUTH_HELLO_BYTES);
    }
    return 0;
}

static int sending(const struct plx__auth *a)
{
    return a->step == C_SEND_HELLO || a->step == C_SEND_PROOF || a->step == S_SEND_CHALLENGE || a->step == S_SEND_ACK;
}

short plx__auth_events(const struct plx__auth *a)
{
    return sending(a) ? POLLOUT : POLLIN;
}

/* A complete message arrived: check it and queue the answer. */
static int on_message(struct plx__auth *a)
{
    unsigned char want[PLX__AUTH_MAC], buf[PLX__AUTH_CHALLENGE_BYTES];
    switch (a->step) {
    case S_READ_HELLO:
        memcpy(a->nc, a->in + sizeof magic, sizeof a->nc);
        randombytes_buf(a->ns, sizeof a->ns);
        memcpy(buf, magic, sizeof magic);
        memcpy(buf + sizeof magic, a->ns, sizeof a->ns);
        mac(a, "server", buf + sizeof magic + sizeof a->ns);
        queue(a, S_SEND_CHALLENGE, buf, PLX__AUTH_CHALLENGE_BYTES);
        return 0;
    case C_READ_CHALLENGE:
        memcpy(a->ns, a->in + sizeof magic, sizeof a->ns);
        mac(a, "server", want);
        if (crypto_verify_32(want, a->in + sizeof magic + sizeof a->ns) != 0)
            return fail(a, "the listener's proof is wrong: it holds a different job secret");
        mac(a, "client", buf);
        queue(a, C_SEND_PROOF, buf, PLX__AUTH_PROOF_BYTES);
        return 0;
    case S_READ_PROOF:
        mac(a, "client", want);
        if (crypto_verify_32(want, a->in) != 0)
            return fail(a, "wrong proof (MAC): the client does not hold the job secret");
        buf[0] = PLX__AUTH_ACK;
        queue(a, S_SEND_ACK, buf, 1);
        return 0;
    case C_READ_ACK:
        if (a->in[0] != PLX__AUTH_ACK)
            return fail(a, "the listener answered the proof with an unknown byte");
        a->step = DONE;
        return 1;
    }
    return fail(a, "internal: bad handshake step");
}

/* Read into a->in; the magic is checked byte by byte so a peer speaking
 * another protocol is refused at its first byte. */
static int read_some(struct plx__auth *a, int fd)
{
    ssize_t k = recv(fd, a->in + a->got, a->need - a->got, MSG_DONTWAIT);
    if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return 0;
    if (k <= 0) {
        a->peer_closed = k == 0;
        if (k < 0)
            return fail(a, strerror(errno));
        return fail(a, a->role == PLX__AUTH_SERVER
                           ? "closed by the client before it authenticated"
                           : "closed by the listener during authentication (it refused us, or does not "
                             "authenticate: torch-compatible mode or a different job?)");
    }
    size_t from = a->got;
    a->got += (size_t)k;
    if (a->step == S_READ_HELLO || a->step == C_READ_CHALLENGE)
        for (size_t i = from; i < a->got && i < sizeof magic; i++)
            if (a->in[i] != (unsigned char)magic[i])
                return fail(a, a->role == PLX__AUTH_SERVER
                                   ? "not a plexus authentication hello (an unauthenticated client: torch's "
                                     "TCPStore, libgloo, or plexus with auth off)"
                                   : "the listener does not speak plexus authentication");
    return 1;
}

int plx__auth_step(struct plx__auth *a, int fd)
{
    for (;;) {
        if (a->step == DONE)
            return 1;
        if (a->step == FAILED)
            return -1;
        if (sending(a)) {
            ssize_t k = send(fd, a->out + a->out_sent, a->out_len - a->out_sent, MSG_DONTWAIT | MSG_NOSIGNAL);
            if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
                return 0;
            if (k <= 0)
                return fail(a, k < 0 ? strerror(errno) : "cannot send");
            a->out_sent += (size_t)k;
            if (a->out_sent < a->out_len)
                continue;
            switch (a->step) {
            case C_SEND_HELLO: expect(a, C_READ_CHALLENGE, PLX__AUTH_CHALLENGE_BYTES); break;
            case S_SEND_CHALLENGE: expect(a, S_READ_PROOF, PLX__AUTH_PROOF_BYTES); break;
            case C_SEND_PROOF: expect(a, C_READ_ACK, 1); break;
            default: a->step = DONE; break; /* S_SEND_ACK */
            }
            continue;
        }
        int r = read_some(a, fd);
        if (r <= 0)
            return r;
        if (a->got == a->need && on_message(a) < 0)
            return -1;
    }
}

const char *plx__auth_waiting_for(const struct plx__auth *a)
{
    return step_names[a->step];
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int plx__auth_run(struct plx__auth *a, int fd, uint64_t deadline_ns)
{
    for (;;) {
        int r = plx__auth_step(a, fd);
        if (r != 0)
            return r;
        uint64_t now = now_ns();
        if (now >= deadline_ns) {
            snprintf(a->why, sizeof a->why, "timed out %s", step_names[a->step]);
            return 0;
        }
        uint64_t ms = (deadline_ns - now) / 1000000u + 1;
        struct pollfd pf = {fd, plx__auth_events(a), 0};
        if (poll(&pf, 1, ms > 60000 ? 60000 : (int)ms) < 0 && errno != EINTR)
            return fail(a, strerror(errno));
    }
}
