/* symmetric.c - registered buffers (plx_mem_alloc) on shm give the same
 * bits as ordinary buffers: allreduce for every dtype x op, counts from one
 * element to several slot rounds (one-phase and multi-round orders), out of
 * place and in place, inputs that make the order of the reduction show
 * (fractions for floats). Then:
 *   - plx_mem_free of a pointer it did not hand out is PLX_ERR_INVALID_ARG;
 *   - ranks that pass buffers at different offsets of their registered
 *     memory fail (PLX_ERR_PROTOCOL) instead of reading the wrong memory:
 *     which also shows the registered path ran (ordinary buffers at any
 *     offsets are fine).
 * With a backend argument other than shm (tcp), plx_mem_alloc hands out
 * ordinary memory and the same comparisons hold; offsets may then differ.
 * Run with plexus-run -n P (ranks of one host): symmetric [BACKEND]. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plexus/plexus.h"

static uint64_t rng_state;

static uint32_t rnd(void)
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(rng_state >> 33);
}

/* count elements of dtype: values for op that neither overflow nor round
 * the same whatever the order (floats carry fractions). */
static void fill(void *buf, size_t count, int dtype, int op)
{
    size_t es = plx_dtype_size(dtype);
    for (size_t i = 0; i < count; i++) {
        char *p = (char *)buf + i * es;
        uint32_t r = rnd();
        double v = op == PLX_PROD ? 1.0 + (double)(r % 1000) / 997.0 - 0.5 : (double)(int)(r % 20001 - 10000) / 7.0;
        int64_t iv = op == PLX_PROD ? (int64_t)(r % 3) - 1 : (int64_t)(r % 201) - 100;
        switch (dtype) {
        case PLX_I8: *(int8_t *)p = (int8_t)iv; break;
        case PLX_U8: *(uint8_t *)p = (uint8_t)(op == PLX_PROD ? r % 2 : r % 50); break;
        case PLX_I32: *(int32_t *)p = (int32_t)iv; break;
        case PLX_U32: *(uint32_t *)p = (uint32_t)(r % 100000); break;
        case PLX_I64: *(int64_t *)p = iv * 1000003; break;
        case PLX_U64: *(uint64_t *)p = (uint64_t)r; break;
        case PLX_F32: *(float *)p = (float)v; break;
        case PLX_F64: *(double *)p = v; break;
        default: { /* f16, bf16: from f32 */
            float f = (float)(v / (op == PLX_PROD ? 1.0 : 64.0));
            plx_dtype_convert(p, dtype, &f, PLX_F32, 1);
        }
        }
    }
}

int main(int argc, char **argv)
{
    const char *backend = argc > 1 ? argv[1] : "shm";
    int shm = !strcmp(backend, "shm");
    struct plx_comm_options o;
    plx_comm_options_init(&o);
    o.backend = backend;
    o.timeout_ms = 60000;
    struct plx_comm *c = NULL;
    if (plx_comm_init(&o, &c) != 0) {
        fprintf(stderr, "symmetric: init: %s\n", plx_last_error());
        return 1;
    }
    int me = plx_comm_rank(c), P = plx_comm_size(c), bad = 0;
    /* 1 (one phase: ordinary path), 4099 (one phase for 1- and 2-byte types), 20011 (one slot round but
     * beyond one phase), 200003 (several 256 KiB slot rounds for 2 bytes and more) */
    const size_t counts[] = {1, 4099, 20011, 200003};
    enum { MAXC = 200003 };
    size_t cap = MAXC * 8 + 64;
    char *reg_send = NULL, *reg_recv = NULL;
    int rc = plx_mem_alloc(c, cap, (void **)&reg_send);
    if (!rc)
        rc = plx_mem_alloc(c, cap, (void **)&reg_recv);
    if (rc) {
        fprintf(stderr, "rank %d: plx_mem_alloc: %s: %s\n", me, plx_err_name(rc), plx_last_error());
        return 1;
    }
    char *send = malloc(cap), *recv = malloc(cap), *inp = malloc(cap);
    if (!send || !recv || !inp)
        return 1;
    int checked = 0;
    for (int dt = 0; dt < PLX_DTYPE_COUNT; dt++)
        for (int op = 0; op < PLX_REDOP_COUNT; op++) {
            int native = plx_comm_native(c, PLX_COLL_ALLREDUCE, dt, op);
            if (shm ? native != 1 : native < 0) /* shm: every case runs natively */
                continue;
            size_t es = plx_dtype_size(dt);
            for (size_t k = 0; k < sizeof counts / sizeof *counts; k++)
                for (int inplace = 0; inplace < 2; inplace++) {
                    size_t n = counts[k], bytes = n * es;
                    rng_state = (uint64_t)(me + 1) * 0x9E3779B97F4A7C15ull ^ (uint64_t)(dt * 131 + op * 17 + k);
                    fill(send, n, dt, op);
                    memcpy(reg_send, send, bytes);
                    int rc1, rc2;
                    if (inplace) {
                        memcpy(recv, send, bytes);
                        rc1 = plx_allreduce(c, recv, recv, n, dt, op);
                        rc2 = plx_allreduce(c, reg_send, reg_send, n, dt, op);
                    } else {
                        rc1 = plx_allreduce(c, send, recv, n, dt, op);
                        rc2 = plx_allreduce(c, reg_send, reg_recv, n, dt, op);
                    }
                    const char *got = inplace ? reg_send : reg_recv;
                    checked++;
                    if (rc1 || rc2) {
                        printf("rank %d: %s %s n=%zu %s: allreduce failed: %s %s: %s\n", me, plx_dtype_name(dt),
                               plx_redop_name(op), n, inplace ? "in place" : "out of place", plx_err_name(rc1),
                               plx_err_name(rc2), plx_last_error());
                        return 1;
                    }
                    if (memcmp(got, recv, bytes) != 0) {
                        size_t i = 0;
                        while (memcmp(got + i * es, recv + i * es, es) == 0)
                            i++;
                        printf("rank %d: %s %s n=%zu %s: registered result differs from the ordinary one at "
                               "element %zu\n", me, plx_dtype_name(dt), plx_redop_name(op), n,
                               inplace ? "in place" : "out of place", i);
                        bad = 1;
                    }
                }
        }
    if (checked < (shm ? 400 : 1)) {
        printf("rank %d: only %d cases ran%s\n", me, checked, shm ? " natively on shm" : "");
        bad = 1;
    }
    /* not ours to free */
    rc = plx_mem_free(c, inp);
    if (rc != PLX_ERR_INVALID_ARG) {
        printf("rank %d: plx_mem_free of malloc'd memory returned %s, want PLX_ERR_INVALID_ARG\n", me, plx_err_name(rc));
        bad = 1;
    }
    /* Disagreeing offsets: rank 0 passes its buffers 64 bytes further in.
     * On shm the communicator is broken afterwards: last. */
    size_t off = me == 0 ? 64 : 0;
    rc = plx_allreduce(c, reg_send + off, reg_recv + off, 100000, PLX_F32, PLX_SUM);
    if (rc != (shm ? PLX_ERR_PROTOCOL : 0)) {
        printf("rank %d: allreduce on registered buffers at offsets that differ by rank returned %s, want %s\n", me,
               plx_err_name(rc), shm ? "PLX_ERR_PROTOCOL" : "success (ordinary memory)");
        bad = 1;
    }
    if (plx_mem_free(c, reg_send) || plx_mem_free(c, reg_recv)) {
        printf("rank %d: plx_mem_free: %s\n", me, plx_last_error());
        bad = 1;
    }
    plx_comm_destroy(c);
    free(send);
    free(recv);
    free(inp);
    printf("rank %d of %d (%s): %d cases, registered = ordinary: %s\n", me, P, backend, checked,
           bad ? "FAILED" : "ok");
    return bad;
}
