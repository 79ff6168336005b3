/* cma.c - single-copy collectives: a rank reads its peers' buffers straight
 * from their address spaces with process_vm_readv (Cross Memory Attach)
 * instead of meeting them in the segment, so each byte crosses memory once
 * instead of twice.
 *
 * Off by default ([shm] cma = true turns it on): process_vm_readv pins the
 * peer's pages on every call, which can cost more than the second copy it
 * saves; `sh bench/compare_shm.sh` with PLEXUS_SHM_CMA=true against the
 * default shows which wins on a given host.
 *
 * The kernel allows it between processes of one uid when the ptrace policy
 * does (Yama ptrace_scope 0 or no Yama; with scope 1 only an ancestor may
 * read, so sibling ranks cannot). It is probed when a communicator is made:
 * every rank reads its neighbour's probe word and all agree through the
 * segment; any failure turns it off for the communicator, with the reason
 * logged, and the two-copy path runs instead.
 *
 * Each op: every rank publishes its buffer addresses in its slot header,
 * barrier; the data phases read from peers; a last barrier keeps every
 * buffer borrowed until nobody reads it any more. Remote addresses come
 * from the segment but only ever go to process_vm_readv as the remote side,
 * so a bad one makes the read fail (or read the peer's own memory); the
 * local side is always this rank's own buffer or scratch, sized here.
 *
 *   allreduce       rank r reduces slice r: its own input, then each peer's
 *                   slice r read into a cache-sized piece and reduced in;
 *                   barrier; every rank reads the other slices from their
 *                   owners' receive buffers into its own.
 *   reduce_scatter  rank r reduces block r the same way.
 *   allgather       every rank reads every peer's block into place.
 *   broadcast       every rank reads the root's buffer. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "shm.h"

#define CMA_MAGIC UINT64_C(0x636d612d70726f62)

int shm__cma_possible(char *why, size_t len)
{
    char v[16] = "";
    FILE *f = fopen("/proc/sys/kernel/yama/ptrace_scope", "re");
    if (f) {
        if (!fgets(v, sizeof v, f))
            v[0] = '\0';
        fclose(f);
        v[strcspn(v, "\n")] = '\0';
    }
    uint64_t word = CMA_MAGIC, got = 0;
    struct iovec l = {&got, sizeof got}, r = {&word, sizeof word};
    if (process_vm_readv(getpid(), &l, 1, &r, 1, 0) != (ssize_t)sizeof got || got != word) {
        snprintf(why, len, "off: process_vm_readv unavailable (%s)", strerror(errno));
        return 0;
    }
    if (v[0] && strcmp(v, "0")) {
        snprintf(why, len, "off: Yama ptrace_scope is %s (sibling ranks may not read each other)", v);
        return 0;
    }
    snprintf(why, len, "on (process_vm_readv works; %s)", v[0] ? "ptrace_scope 0" : "no Yama");
    return 1;
}

/* Read len bytes of rank q's memory at raddr into dst. */
static int pull(struct shm_op *o, int q, void *dst, uint64_t raddr, size_t len)
{
    struct shm_comm *c = o->c;
    int32_t pid = shm__ctl(c, q)->pid;
    while (len) {
        struct iovec l = {dst, len}, r = {(void *)(uintptr_t)raddr, len};
        ssize_t n = pid > 0 ? process_vm_readv(pid, &l, 1, &r, 1, 0) : -1;
        if (n <= 0) {
            int e = n < 0 ? errno : EIO, st = e == ESRCH ? PLX_ERR_PEER_LOST : PLX_ERR_PROTOCOL;
            uint32_t qs = __atomic_load_n(&shm__ctl(c, q)->state, __ATOMIC_ACQUIRE);
            if (qs != SHM_STATE_ACTIVE) { /* it gave up first (and may be gone): say so, not "lost" */
                shm__fail(c, PLX_ERR_REMOTE, -1);
                return shm__op_error(o, PLX_ERR_REMOTE, "%s(seq %llu): rank %d %s while rank %d read its buffers on shm",
                                     o->what, (unsigned long long)o->a->seq, q,
                                     qs == SHM_STATE_LEFT ? "left" : "failed", c->rank);
            }
            shm__fail(c, st, e == ESRCH ? q : -1);
            return shm__op_error(o, st, "%s(seq %llu): rank %d could not read %zu bytes of rank %d (pid %d) at 0x%llx: %s",
                                 o->what, (unsigned long long)o->a->seq, c->rank, len, q, (int)pid,
                                 (unsigned long long)raddr, strerror(e));
        }
        dst = (char *)dst + n;
        raddr += (uint64_t)n;
        len -= (size_t)n;
    }
    return 0;
}

int shm__cma_agree(struct shm_op *o)
{
    struct shm_comm *c = o->c;
    struct shm_ctl *me = shm__ctl(c, c->rank);
    c->cma = 0;
    uint32_t ok = 2;
    if (c->size > 1 && c->cfg.cma && shm__cma_possible(c->cma_why, sizeof c->cma_why)) {
        int q = (c->rank + 1) % c->size;
        uint64_t got = 0, want = CMA_MAGIC ^ (uint64_t)(uint32_t)shm__ctl(c, q)->pid;
        struct iovec l = {&got, sizeof got}, r = {(void *)(uintptr_t)shm__ctl(c, q)->cma_addr, sizeof got};
        int32_t pid = shm__ctl(c, q)->pid;
        if (pid > 0 && process_vm_readv(pid, &l, 1, &r, 1, 0) == (ssize_t)sizeof got && got == want)
            ok = 1;
        else
            snprintf(c->cma_why, sizeof c->cma_why, "off: rank %d could not read rank %d's memory (%s)", c->rank, q,
                     got == want ? strerror(errno) : "wrong word");
    } else if (c->size > 1 && !c->cfg.cma) {
        snprintf(c->cma_why, sizeof c->cma_why, "off ([shm] cma = false, the default)");
    }
    __atomic_store_n(&me->cma_ok, ok, __ATOMIC_RELEASE);
    int rc = shm__barrier(o);
    if (rc)
        return rc;
    int all = c->size > 1;
    for (int r = 0; r < c->size; r++)
        if (__atomic_load_n(&shm__ctl(c, r)->cma_ok, __ATOMIC_ACQUIRE) != 1) {
            if (all && r != c->rank && ok == 1)
                snprintf(c->cma_why, sizeof c->cma_why, "off: rank %d cannot read its neighbour's memory", r);
            all = 0;
        }
    if (all && !(c->piece = malloc(SHM_PIECE_BYTES)))
        all = 0;
    c->cma = all;
    c->host->log(c->host->ctx, PLX_LOG_DEBUG, "shm: comm '%s': single-copy %s", c->name, all ? "on" : c->cma_why);
    return 0;
}

int shm__cma_wants(const struct shm_op *o)
{
    const struct plx_coll_args *a = o->a;
    if (!o->c->cma || a->count * o->es < o->c->cfg.cma_min_bytes)
        return 0;
    return a->coll == PLX_COLL_ALLREDUCE || a->coll == PLX_COLL_REDUCE_SCATTER || a->coll == PLX_COLL_ALLGATHER ||
           a->coll == PLX_COLL_BROADCAST;
}

/* out[0, n) op= every peer's send buffer from element elem_off on, piece
 * by piece: each piece of out takes all peers while it is in cache. */
static int reduce_remote(struct shm_op *o, char *out, size_t n, uint32_t half, size_t elem_off)
{
    struct shm_comm *c = o->c;
    const struct plx_coll_args *a = o->a;
    size_t es = o->es, per = SHM_PIECE_BYTES / es;
    for (size_t base = 0; base < n; base += per) {
        size_t k = n - base < per ? n - base : per;
        for (int s = 1; s < c->size; s++) {
            int q = (c->rank + s) % c->size, rc;
            uint64_t ra = shm__ctl(c, q)->hdr[half].send_addr;
            if ((rc = pull(o, q, c->piece, ra + (elem_off + base) * es, k * es)) != 0)
                return rc;
            if ((rc = c->host->reduce(out + base * es, c->piece, k, a->dtype, a->op)) != 0)
                return shm__op_error(o, rc, "%s(seq %llu): the core's reduction kernel refused dtype %d op %d", o->what,
                                     (unsigned long long)a->seq, a->dtype, a->op);
        }
    }
    if (a->op == PLX_AVG && n)
        return c->host->scale_div(out, n, a->dtype, (uint64_t)c->size);
    return 0;
}

static void copy(void *dst, const void *src, size_t n)
{
    if (n && dst != src)
        memmove(dst, src, n);
}

int shm__cma_run(struct shm_op *o)
{
    struct shm_comm *c = o->c;
    const struct plx_coll_args *a = o->a;
    size_t es = o->es, n = a->count, P = (size_t)c->size, me = (size_t)c->rank, s0, s1;
    const char *send = a->send;
    char *recv = a->recv;
    uint32_t half = shm__publish(o, 0, n);
    int rc = shm__barrier(o);
    if (rc || (rc = shm__expect_all(o, half)) != 0)
        return rc;
    const struct shm_slot_hdr *hq;
    switch (a->coll) {
    case PLX_COLL_ALLREDUCE:
        shm__slice(o, n, c->rank, &s0, &s1);
        copy(recv + s0 * es, send + s0 * es, (s1 - s0) * es);
        if ((rc = reduce_remote(o, recv + s0 * es, s1 - s0, half, s0)) != 0 || (rc = shm__barrier(o)) != 0)
            return rc;
        for (int q = 0; q < c->size; q++) {
            if (q == c->rank)
                continue;
            shm__slice(o, n, q, &s0, &s1);
            hq = &shm__ctl(c, q)->hdr[half];
            if (s1 > s0 && (rc = pull(o, q, recv + s0 * es, hq->recv_addr + s0 * es, (s1 - s0) * es)) != 0)
                return rc;
        }
        break;
    case PLX_COLL_REDUCE_SCATTER:
        copy(recv, send + me * n * es, n * es);
        if ((rc = reduce_remote(o, recv, n, half, me * n)) != 0)
            return rc;
        break;
    case PLX_COLL_ALLGATHER:
        copy(recv + me * n * es, send, n * es);
        for (size_t q = 0; q < P; q++) {
            hq = &shm__ctl(c, (int)q)->hdr[half];
            if (q != me && (rc = pull(o, (int)q, recv + q * n * es, hq->send_addr, n * es)) != 0)
                return rc;
        }
        break;
    default: /* broadcast */
        hq = &shm__ctl(c, a->root)->hdr[half];
        if (c->rank != a->root && (rc = pull(o, a->root, recv, hq->recv_addr, n * es)) != 0)
            return rc;
        break;
    }
    return shm__barrier(o); /* nobody reads this rank's buffers after it returns */
}
