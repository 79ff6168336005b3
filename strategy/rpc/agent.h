/* agent.h - what the RPC files share: the agent, the wire header, calls in
 * flight and owned values. Stability: internal.
 *
 * Wire: every message is a fixed header on TAG_HDR (received from any
 * source) followed, when payload_len > 0, by the payload on TAG_DATA from
 * the same rank. A rank posts both sends of a message under send_mu, so
 * per (peer, tag) FIFO pairs each header with its payload. */
#ifndef PLX_CORE_RPC_AGENT_H
#define PLX_CORE_RPC_AGENT_H

#include <pthread.h>
#include <stdint.h>

#include "plexus/rpc.h"

#define PLX__RPC_TAG_HDR 1
#define PLX__RPC_TAG_DATA 2
#define PLX__RPC_TAG_BYE 3 /* one byte to each peer at shutdown; until then a receive that fails if the peer is lost */
#define PLX__RPC_MAX_PAYLOAD ((uint64_t)1 << 32)

enum plx__rpc_kind {
    RPC_CALL = 1,   /* payload: name, args; response: the result */
    RPC_REMOTE = 2, /* payload: name, args; response: rref_id of the kept result */
    RPC_FETCH = 3,  /* rref_id; response: a copy of the value */
    RPC_INCREF = 4, /* rref_id; response: empty (the count is taken) */
    RPC_DECREF = 5, /* rref_id; response: empty */
    RPC_RESP = 6,   /* call_id, status; payload: result, or the error message */
    RPC_STOP = 7,   /* from the left neighbour at shutdown: the last message */
};

struct plx__rpc_hdr {
    uint32_t kind;
    int32_t status;
    uint64_t call_id;
    uint64_t rref_id;
    uint32_t name_len;
    int32_t src; /* the sender: an any-source receive does not say */
    uint64_t payload_len;
};

/* A call this rank made, until its response arrives (even if its caller
 * gave up waiting: shutdown counts it as outstanding until then). */
struct plx__rpc_call {
    uint64_t id;
    int dst, kind;
    char name[PLX_RPC_NAME_MAX + 1];
    uint64_t deadline_ns;     /* deadline.h; PLX_DEADLINE_NEVER: none */
    int done, status, abandoned;
    void *out;
    size_t out_len;
    uint64_t rref_id;
    char err[768];
    struct plx__rpc_call *next;
};

/* A message being sent: its buffers live until both sends complete. */
struct plx__rpc_out {
    struct plx_work *wh, *wd;
    struct plx__rpc_hdr hdr;
    void *payload;
    struct plx__rpc_out *next;
};

struct plx__rpc_value {
    uint64_t id;
    int64_t refs;
    void *data;
    size_t len;
};

struct plx__rpc_handler {
    char name[PLX_RPC_NAME_MAX + 1];
    plx_rpc_handler fn;
    void *ctx;
};

struct plx_rpc {
    struct plx_comm *data, *ctl; /* private: messages; shutdown's agreement */
    int rank, size;
    int64_t timeout_ms;
    pthread_t thread;
    int has_thread;
    pthread_mutex_t mu, send_mu;
    pthread_cond_t cv; /* a call completed */
    /* under mu */
    struct plx__rpc_handler *handlers;
    int nhandlers;
    struct plx__rpc_call *calls;
    int64_t outstanding; /* calls in `calls` */
    int64_t issued;      /* requests ever sent (monotone) */
    uint64_t next_call, next_value;
    struct plx__rpc_value *values;
    size_t nvalues;
    struct plx__rpc_out *outs;
    int broken;          /* the data communicator failed: status */
    char broken_msg[768];
    int stopped;         /* shutdown completed */
    int abandon;         /* destroy without shutdown: the thread must leave */
    /* progress thread only: per peer, a receive of its shutdown byte. An
     * any-source receive is not failed when one peer is lost; these are. */
    struct plx_work **bye;
    unsigned char *bye_buf;
};

int plx__rpc_on_progress_thread(const struct plx_rpc *rpc);
/* Send one message (copies nothing: payload is owned by the agent after
 * the call, freed when sent). Under send_mu. */
int plx__rpc_send(struct plx_rpc *rpc, int dst, const struct plx__rpc_hdr *h, void *payload);
/* Complete sends that finished; wait_all: wait for every one. */
void plx__rpc_reap(struct plx_rpc *rpc, int wait_all);
/* Start a request: registers the call, sends it. On success *out is the
 * call (owned by the agent's list). name may be NULL. */
int plx__rpc_start(struct plx_rpc *rpc, int dst, int kind, const char *name, const void *args, size_t len,
                   uint64_t rref_id, int64_t timeout_ms, struct plx__rpc_call **out);
/* Wait for a call (until its deadline); hands over its result (and the
 * rref id of a REMOTE) and frees it, or marks it abandoned on timeout. */
int plx__rpc_finish(struct plx_rpc *rpc, struct plx__rpc_call *c, void **result, size_t *len, uint64_t *rref_id);
/* Run a handler by name (outside mu). */
int plx__rpc_invoke(struct plx_rpc *rpc, const char *name, int caller, const void *args, size_t len, void **result,
                    size_t *result_len, char *err, size_t err_cap);
/* The progress thread's work on one incoming message. */
void plx__rpc_serve(struct plx_rpc *rpc, int src, const struct plx__rpc_hdr *h, void *payload);
/* Fail every outstanding call with the agent's broken status. Under mu. */
void plx__rpc_fail_all(struct plx_rpc *rpc);

/* Owned values (rref.c), under mu. */
int plx__rpc_value_add(struct plx_rpc *rpc, void *data, size_t len, uint64_t *id);
struct plx__rpc_value *plx__rpc_value_find(struct plx_rpc *rpc, uint64_t id);
/* refs += delta; frees the value at 0. Returns -1 if unknown. */
int plx__rpc_value_ref(struct plx_rpc *rpc, uint64_t id, int delta);
/* Drop one reference to value id of owner without waiting (not under mu). */
int plx__rpc_release_id(struct plx_rpc *rpc, int owner, uint64_t id);

#endif
