/* auth.h - mutual challenge-response on a fresh TCP connection, keyed by
 * the job secret (PLEXUS_JOB_SECRET), before the tcp:// store or a tcp
 * transport listener lets a peer speak its protocol.
 *
 * Bytes on the wire (dialer = client, listener = server):
 *   client -> server  HELLO      "PLXAUTH1" | Nc[32]                     40 B
 *   server -> client  CHALLENGE  "PLXAUTH1" | Ns[32] | MACs[32]          72 B
 *   client -> server  PROOF      MACc[32]                                32 B
 *   server -> client  ACK        0x01                                     1 B
 * MACx = HMAC-SHA256(secret, "plexus-auth/1 " role | u32 len(ctx) | ctx |
 * Nc | Ns), role "server" or "client", ctx names the connection ("store",
 * "tcp/<comm>/<dialer>-><listener>"). Nonces come from libsodium's CSPRNG,
 * MACs are compared in constant time. Each side proves the secret over the
 * other's fresh nonce, so a recorded exchange cannot be replayed, and the
 * role label keeps one side's MAC from serving as the other's. After the
 * ACK the connection carries the plain protocol: this authenticates who
 * connects, it does not encrypt or protect the stream afterwards.
 *
 * Self-contained (libsodium and POSIX only) so the tcp plugin builds it too.
 * Stability: internal. */
#ifndef PLX_CORE_AUTH_H
#define PLX_CORE_AUTH_H

#include <stddef.h>
#include <stdint.h>

#define PLX__AUTH_ENV "PLEXUS_JOB_SECRET"
#define PLX__AUTH_MIN_SECRET 16 /* characters; plexus-run generates 64 */
#define PLX__AUTH_NONCE 32
#define PLX__AUTH_MAC 32
#define PLX__AUTH_HELLO_BYTES 40
#define PLX__AUTH_CHALLENGE_BYTES 72
#define PLX__AUTH_PROOF_BYTES 32
#define PLX__AUTH_ACK 0x01

enum { PLX__AUTH_CLIENT = 0, PLX__AUTH_SERVER = 1 };

/* One handshake, either side. Caller memory: plx__auth_init, then step it. */
struct plx__auth {
    int role, step;
    const char *secret; /* borrowed: valid until the handshake ends */
    size_t secret_len;
    char ctx[128];
    unsigned char nc[PLX__AUTH_NONCE], ns[PLX__AUTH_NONCE];
    unsigned char in[PLX__AUTH_CHALLENGE_BYTES];
    size_t need, got;   /* bytes the current step reads */
    unsigned char out[PLX__AUTH_CHALLENGE_BYTES];
    size_t out_len, out_sent;
    int peer_closed;    /* the failure was the peer closing the connection */
    char why[160];      /* why it failed */
};

/* Check a secret's form: 0, or -1 with why filled. */
int plx__auth_secret_ok(const char *secret, char *why, size_t why_len);

/* The job's one authentication policy, for each side that may ask for it
 * (the tcp:// store reads [core] auth, the tcp transport [tcp] auth, and
 * plexus-info reports both as they will decide): mode is that section's
 * auth value (auto, on or off; NULL: auto), secret what PLX__AUTH_ENV holds
 * (NULL: unset). Returns 0 with *use the secret to prove, or NULL for the
 * plain protocol (off, or auto without a secret) with why saying which;
 * -1 with why filled where the job must not start: on without a secret, or
 * a secret too short. */
int plx__auth_policy(const char *section, const char *mode, const char *secret, const char **use, char *why,
                     size_t why_len);

/* Start a handshake for role with secret (borrowed) and ctx (copied; at
 * most 127 bytes are used). Returns 0, or -1 if libsodium cannot start. */
int plx__auth_init(struct plx__auth *a, int role, const char *secret, const char *ctx);

/* Advance on fd without blocking (the socket may be blocking or not: only
 * MSG_DONTWAIT calls are made, and never more bytes are read than the
 * handshake holds, so the protocol that follows is untouched). Returns 1
 * when the peer is authenticated, 0 while it needs more I/O (poll for
 * plx__auth_events), -1 when refused or broken (a->why says why). */
int plx__auth_step(struct plx__auth *a, int fd);

/* POLLIN or POLLOUT: what the next step waits for. */
short plx__auth_events(const struct plx__auth *a);

/* Step and poll until done or deadline_ns (CLOCK_MONOTONIC ns). Returns 1,
 * -1 (a->why), or 0 on timeout (a->why says which step it waited at). */
int plx__auth_run(struct plx__auth *a, int fd, uint64_t deadline_ns);

/* What the handshake waits for now, for messages ("waiting for the
 * client's hello"). Static storage. */
const char *plx__auth_waiting_for(const struct plx__auth *a);

/* Fill buf with n random bytes from the OS (libsodium). */
void plx__auth_random(void *buf, size_t n);

#endif
