/* store_tcp.h - PyTorch TCPStore protocol (torch 1.13's; the server also
 * 2.x's): constants, the request decoder (a pure function, so it can be
 * fuzzed) and the server.
 * Stability: internal. */
#ifndef PLX_CORE_STORE_TCP_H
#define PLX_CORE_STORE_TCP_H

#include <stddef.h>
#include <stdint.h>

struct plx_config; /* config.h: a communicator's view of the configuration */

enum {
    PLX__Q_SET = 0, PLX__Q_COMPARE_SET = 1, PLX__Q_GET = 2, PLX__Q_ADD = 3, PLX__Q_CHECK = 4,
    PLX__Q_WAIT = 5, PLX__Q_GETNUMKEYS = 6, PLX__Q_WATCH_KEY = 7, PLX__Q_DELETE_KEY = 8,
};
enum { PLX__READY = 0, PLX__NOT_READY = 1, PLX__STOP_WAITING = 0, PLX__WAIT_CANCELED = 1 };
/* torch 2.x's protocol (TCPStore.cpp since 2.2): a connection opens with
 * VALIDATE (code 0, then the u32 magic below); its codes 1..8 are SET ..
 * GETNUMKEYS, DELETE_KEY of the above shifted by one; PING (u32 nonce,
 * echoed) and CANCEL_WAIT (answered WAIT_CANCELED) are new. The server
 * maps them onto the internal types below or the ones above. */
#define PLX__TORCH2_MAGIC 0x3C85F7CEu
enum { PLX__Q2_VALIDATE = 0, PLX__Q2_CANCEL_WAIT = 12, PLX__Q2_PING = 13 };
enum { PLX__Q_VALIDATE = 100, PLX__Q_CANCEL_WAIT = 101, PLX__Q_PING = 102 };

/* Default bounds on what a client may send ([core] store_max_* change
 * them); larger is refused. PLX__STORE_MAX_KEYS is the decoder's fixed
 * ceiling on keys in one CHECK/WAIT. */
#define PLX__STORE_MAX_KEY (64u << 10)
#define PLX__STORE_MAX_VALUE (64u << 20)
#define PLX__STORE_MAX_KEYS 4096u
#define PLX__STORE_MAX_CLIENTS 1024
#define PLX__STORE_MAX_PENDING 1024u

struct plx__store_limits {
    uint64_t max_key, max_value; /* bytes */
    size_t max_clients;          /* connections, authenticated or not */
    size_t max_pending;          /* keys of a pending WAIT + requests queued behind it */
    int64_t auth_timeout_ms;     /* a connection that has not authenticated by then is dropped */
    const char *secret;          /* NULL: no authentication (torch-compatible) */
    const char *listen;          /* NULL or "": the host given to server_start */
};

/* A decoded request: pointers into the input buffer. */
struct plx__store_req {
    int type;
    size_t nstr;              /* strings: key(s), values */
    const char *str[3];       /* SET: key, value; COMPARE_SET: key, expected, desired; GET/ADD/...: key */
    size_t len[3];
    int64_t delta;            /* ADD */
    size_t nkeys;             /* CHECK/WAIT: keys are in keys_at, one u64 length + bytes each */
    const unsigned char *keys_at;
    uint64_t bad_len;         /* when refused for a limit: the length asked for */
};

/* Decode one request from buf[0..n). Returns the bytes it used (> 0), 0 if
 * more input is needed, or -1 with *why set for a malformed request. */
long plx__store_decode(const unsigned char *buf, size_t n, struct plx__store_req *req, const char **why);
/* The same with the key and value bounds of lim (max_key, max_value). */
long plx__store_decode_with(const unsigned char *buf, size_t n, struct plx__store_req *req, const char **why,
                            const struct plx__store_limits *lim);
/* Key i of a CHECK/WAIT request (i < nkeys); valid while buf is. */
void plx__store_req_key(const struct plx__store_req *req, size_t i, const char **key, size_t *len);

/* The limits and secret from [core] (auth, auth_timeout_ms, store_*) through
 * v (NULL: the process layers) and PLEXUS_JOB_SECRET. *lim->secret points
 * into the environment. Returns 0 or PLX_ERR_CONFIG ([core] auth = on
 * without a usable secret). */
int plx__store_limits_from_config(const struct plx_config *v, struct plx__store_limits *lim);

struct plx__store_server;
/* Listen on host:port (port 0: any; *bound_port gets it) and serve until
 * stop, with the limits and secret of the process layers. */
int plx__store_server_start(const char *host, int port, struct plx__store_server **out, int *bound_port);
/* The same with explicit limits (copied; lim->secret too). */
int plx__store_server_start_with(const char *host, int port, const struct plx__store_limits *lim,
                                 struct plx__store_server **out, int *bound_port);
void plx__store_server_stop(struct plx__store_server *s);
/* A server this process hosts on host:port for a communicator: the one it
 * already serves there, else a new one. Released, it keeps serving until
 * the process ends (store_tcp_hosted.c). */
int plx__store_hosted_acquire(const char *host, int port, const struct plx__store_limits *lim,
                              struct plx__store_server **out);
/* The same on a port the kernel picks (*port gets it), for a launcher that
 * publishes the address afterwards: plx__store_hosted_acquire(host, *port)
 * then serves from this server. */
int plx__store_hosted_acquire_any(const char *host, const struct plx__store_limits *lim,
                                  struct plx__store_server **out, int *port);
void plx__store_hosted_release(struct plx__store_server *s);

#endif
