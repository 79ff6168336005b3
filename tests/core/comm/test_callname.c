/* test_callname.c - every collective has a name, and the words for a call
 * (mismatch messages of the core, shm and sim) name every kind, the
 * v-collectives included; what each kind takes is what its API says. */
#include "plexus/plexus.h"

#include <stdio.h>
#include <string.h>

#include "callname.h"
#include "check.h"
#include "collv.h"

static int failures;

int main(void)
{
    /* From the API: which calls take a reduction op, a root, per-rank counts. */
    static const struct {
        int coll;
        const char *name;
        int op, root, v;
    } want[] = {
        {PLX_COLL_ALLREDUCE, "allreduce", 1, 0, 0},   {PLX_COLL_BROADCAST, "broadcast", 0, 1, 0},
        {PLX_COLL_REDUCE, "reduce", 1, 1, 0},         {PLX_COLL_ALLGATHER, "allgather", 0, 0, 0},
        {PLX_COLL_REDUCE_SCATTER, "reduce_scatter", 1, 0, 0}, {PLX_COLL_GATHER, "gather", 0, 1, 0},
        {PLX_COLL_SCATTER, "scatter", 0, 1, 0},       {PLX_COLL_ALLTOALL, "alltoall", 0, 0, 0},
        {PLX_COLL_BARRIER, "barrier", 0, 0, 0},       {PLX_COLL_SEND, "send", 0, 0, 0},
        {PLX_COLL_RECV, "recv", 0, 0, 0},             {PLX_COLL_ALLTOALLV, "alltoallv", 0, 0, 1},
        {PLX_COLL_ALLGATHERV, "allgatherv", 0, 0, 1},
    };
    CHECK(sizeof want / sizeof want[0] == PLX_COLL_COUNT);
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        int k = want[i].coll;
        const char *name = plx_coll_name(k);
        CHECKF(name && !strcmp(name, want[i].name), "plx_coll_name(%d) = %s, want %s", k, name ? name : "NULL",
               want[i].name);
        CHECKF(plx__call_has_op(k) == want[i].op, "%s: has_op %d", want[i].name, plx__call_has_op(k));
        CHECKF(plx__call_has_root(k) == want[i].root, "%s: has_root %d", want[i].name, plx__call_has_root(k));
        CHECKF(plx__coll_is_v(k) == want[i].v, "%s: is_v %d", want[i].name, plx__coll_is_v(k));

        char text[160], prefix[40];
        plx__call_describe(k, 7, PLX_F32, PLX_SUM, 8, 1, text, sizeof text);
        snprintf(prefix, sizeof prefix, "%s(seq 7", want[i].name);
        CHECKF(!strncmp(text, prefix, strlen(prefix)) && !strstr(text, "null"), "describe(%s) = '%s'",
               want[i].name, text);
        CHECKF(!!strstr(text, ", sum") == want[i].op, "describe(%s) = '%s': the op iff it takes one", want[i].name,
               text);
        CHECKF(!!strstr(text, ", root 1") == want[i].root, "describe(%s) = '%s': the root iff it takes one",
               want[i].name, text);

        /* The core's fingerprint of the call prints the same words. */
        struct plx_coll_args a = {.struct_size = sizeof a, .coll = k, .dtype = PLX_F32, .op = PLX_SUM, .root = 1,
                                  .count = 8, .seq = 7};
        struct plx__fp fp = plx__fp_of(&a);
        char fptext[160];
        plx__fp_format(&fp, fptext, sizeof fptext);
        CHECKF(!strcmp(fptext, text), "fingerprint of %s: '%s', describe: '%s'", want[i].name, fptext, text);
    }
    CHECK(!strcmp(plx_coll_name(PLX_COLL_COUNT), "?"));
    CHECK(!plx__call_has_op(-1) && !plx__call_has_root(PLX_COLL_COUNT) && !plx__coll_is_v(PLX_COLL_COUNT));
    char text[160];
    plx__call_describe(PLX_COLL_COUNT, 1, PLX_F32, 0, 1, 0, text, sizeof text);
    CHECKF(!strncmp(text, "?(seq 1", 7), "an unknown kind: '%s'", text);
    if (failures)
        fprintf(stderr, "%d checks failed\n", failures);
    else
        printf("ok: %d collective kinds named and described\n", PLX_COLL_COUNT);
    return failures != 0;
}
