/* fuzz_store_decode.c - the TCPStore request decoder (plx__store_decode)
 * over a byte stream, as the server feeds it: decode, consume, repeat.
 *
 * Checks beyond "no crash": every pointer it returns lies inside the bytes
 * it says it used; a malformed request says why; and the decoder is
 * consistent as a stream decoder must be: the same request cut one byte
 * short asks for more input (0), and given exactly its bytes it decodes to
 * the same length. Each decode reads from a heap copy of exactly the bytes
 * it is given, so a read past them is an ASan report. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_check.h"
#include "store_tcp.h"

static unsigned sink; /* keeps the byte reads below from being optimised away */

static void touch(const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        sink += b[i];
}

static long decode_copy(const unsigned char *buf, size_t n, struct plx__store_req *req)
{
    unsigned char *copy = malloc(n ? n : 1);
    FUZZ_CHECK(copy);
    memcpy(copy, buf, n);
    const char *why = NULL;
    long r = plx__store_decode(copy, n, req, &why);
    free(copy);
    return r;
}

static int inside(const unsigned char *base, size_t used, const void *p, size_t len)
{
    const unsigned char *q = p;
    return q >= base && q <= base + used && len <= (size_t)(base + used - q);
}

/* One request at buf[0..n): returns the bytes used, 0 or -1. */
static long one(const unsigned char *buf, size_t n)
{
    struct plx__store_req req;
    const char *why = NULL;
    long r = plx__store_decode(buf, n, &req, &why);
    FUZZ_CHECK(r >= -1 && (r < 0 || (size_t)r <= n));
    if (r < 0) {
        FUZZ_CHECK(why && why[0]);
        return r;
    }
    if (r == 0)
        return 0;
    FUZZ_CHECK(req.nstr <= 3);
    for (size_t i = 0; i < req.nstr; i++) {
        FUZZ_CHECK(inside(buf, (size_t)r, req.str[i], req.len[i]));
        FUZZ_CHECK(req.len[i] <= (i == 0 ? PLX__STORE_MAX_KEY : PLX__STORE_MAX_VALUE));
        touch(req.str[i], req.len[i]);
    }
    if (req.nkeys) {
        FUZZ_CHECK(req.nkeys <= PLX__STORE_MAX_KEYS);
        const char *k = NULL;
        size_t kl = 0;
        for (size_t i = 0; i < req.nkeys; i++) {
            plx__store_req_key(&req, i, &k, &kl);
            FUZZ_CHECK(kl <= PLX__STORE_MAX_KEY && inside(buf, (size_t)r, k, kl));
            touch(k, kl);
        }
        FUZZ_CHECK((const unsigned char *)k + kl == buf + r); /* the last key ends the request */
    }
    /* Stream consistency: one byte short needs more; exactly r is r again. */
    struct plx__store_req again;
    FUZZ_CHECK(decode_copy(buf, (size_t)r - 1, &again) == 0);
    FUZZ_CHECK(decode_copy(buf, (size_t)r, &again) == r);
    FUZZ_CHECK(again.type == req.type && again.nstr == req.nstr && again.nkeys == req.nkeys &&
               again.delta == req.delta);
    return r;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t off = 0;
    for (int i = 0; i < 64 && off < size; i++) {
        /* Each request is decoded from its own exact-size copy, so the
         * decoder never sees bytes past what the "socket" delivered. */
        size_t n = size - off;
        unsigned char *copy = malloc(n);
        FUZZ_CHECK(copy);
        memcpy(copy, data + off, n);
        long r = one(copy, n);
        free(copy);
        if (r <= 0)
            break;
        off += (size_t)r;
    }
    return 0;
}
