/* Pipeline schedules as data, and the checker that proves them: every
 * GPipe and 1F1B schedule for S <= 16, M <= 64, every interleaved one for
 * V = 2 .. 4 (M a multiple of S, M <= 64) completes; the peak stashed
 * activations per stage and the ideal bubble (equal forward and backward
 * costs, free communication) equal the published formulas; shapes the
 * generator must refuse are refused; and lists broken on purpose (one
 * mutation each) are rejected with a message that says why. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plexus/parallel.h"

static int failures;

#define CHECK(cond)                                                                                          \
    do {                                                                                                     \
        if (!(cond)) {                                                                                       \
            fprintf(stderr, "%s:%d: CHECK failed: %s (last error: %s)\n", __FILE__, __LINE__, #cond,       \
                    plx_last_error());                                                                       \
            failures++;                                                                                      \
        }                                                                                                    \
    } while (0)

/* Published values. GPipe stashes all M; 1F1B stage s stashes S - s
 * (PipeDream-flush, Narayanan et al. 2021); interleaved stage s runs
 * Megatron-LM's warm-up of 2 (S - s - 1) + (V - 1) S chunk forwards, then
 * holds one more (in units of one chunk's activations). Bubble fraction of
 * the run: (S - 1) / (M + S - 1) (GPipe paper), and for V chunks of 1/V the
 * work each, (S - 1) / (V M + S - 1) (Narayanan et al., section 2.2.2:
 * bubble time (S - 1)/V of a stage's per-micro-batch time). */
static int want_peak(int kind, int S, int M, int V, int s)
{
    if (kind == PLX_PIPE_GPIPE)
        return M;
    if (kind == PLX_PIPE_1F1B)
        return S - s < M ? S - s : M;
    int warm = 2 * (S - s - 1) + (V - 1) * S;
    return warm + 1 < V * M ? warm + 1 : V * M;
}

static double want_bubble(int S, int M, int V)
{
    return (double)(S - 1) / (V * M + S - 1);
}

static struct plx_pipe_stats st[16];
static double worst_dev[3];

static void prove(int kind, int S, int M, int V)
{
    struct plx_pipe_schedule *s;
    int rc = plx_pipe_schedule_create(kind, S, M, V, &s);
    CHECK(rc == 0);
    if (rc)
        return;
    st[0].struct_size = sizeof st[0];
    rc = plx_pipe_schedule_check(s, 1.0, 1.0, st);
    if (rc) {
        fprintf(stderr, "%s S=%d M=%d V=%d refused: %s\n", plx_pipe_kind_name(kind), S, M, V, plx_last_error());
        failures++;
    }
    for (int i = 0; !rc && i < S; i++) {
        if (st[i].peak_live != want_peak(kind, S, M, V, i)) {
            fprintf(stderr, "%s S=%d M=%d V=%d stage %d: peak %d, formula %d\n", plx_pipe_kind_name(kind), S, M, V,
                    i, st[i].peak_live, want_peak(kind, S, M, V, i));
            failures++;
        }
        CHECK(st[i].forwards == V * M && st[i].backwards == V * M);
        double dev = fabs(st[i].bubble - want_bubble(S, M, V));
        if (dev > worst_dev[kind])
            worst_dev[kind] = dev;
    }
    plx_pipe_schedule_destroy(s);
}

/* A copy of a schedule's lists that a test may break. */
struct lists {
    int S, M, V;
    struct plx_pipe_action *l[16];
    int n[16];
};

static void copy_lists(int kind, int S, int M, int V, struct lists *out)
{
    struct plx_pipe_schedule *s;
    CHECK(plx_pipe_schedule_create(kind, S, M, V, &s) == 0);
    *out = (struct lists){.S = S, .M = M, .V = V};
    for (int i = 0; i < S; i++) {
        const struct plx_pipe_action *a;
        CHECK(plx_pipe_schedule_actions(s, i, &a, &out->n[i]) == 0);
        out->l[i] = malloc((size_t)(out->n[i] + 1) * sizeof *a);
        memcpy(out->l[i], a, (size_t)out->n[i] * sizeof *a);
    }
    plx_pipe_schedule_destroy(s);
}

static int find(const struct lists *x, int stage, int op, int mb)
{
    for (int i = 0; i < x->n[stage]; i++)
        if (x->l[stage][i].op == op && x->l[stage][i].mb == mb)
            return i;
    return -1;
}

static void move(struct lists *x, int stage, int from, int to)
{
    struct plx_pipe_action a = x->l[stage][from], *l = x->l[stage];
    if (from < to)
        memmove(&l[from], &l[from + 1], (size_t)(to - from) * sizeof *l);
    else
        memmove(&l[to + 1], &l[to], (size_t)(from - to) * sizeof *l);
    l[to] = a;
}

static void expect_refusal(struct lists *x, const char *what, const char *want)
{
    int rc = plx_pipe_check_lists(x->S, x->M, x->V, (const struct plx_pipe_action *const *)x->l, x->n, 1, 1, NULL);
    printf("broken (%s): %s\n", what, rc ? plx_last_error() : "ACCEPTED");
    CHECK(rc == PLX_ERR_INVALID_ARG);
    CHECK(strstr(plx_last_error(), want) != NULL);
    for (int i = 0; i < x->S; i++)
        free(x->l[i]);
}

static void mutations(void)
{
    struct lists x;
    int i;
    /* The unbroken copy passes (so the refusals below are the mutations'). */
    copy_lists(PLX_PIPE_1F1B, 4, 8, 1, &x);
    CHECK(plx_pipe_check_lists(4, 8, 1, (const struct plx_pipe_action *const *)x.l, x.n, 1, 1, NULL) == 0);
    for (i = 0; i < 4; i++)
        free(x.l[i]);

    /* Stage 0 waits for micro-batch 0's gradient before any forward. */
    copy_lists(PLX_PIPE_1F1B, 4, 8, 1, &x);
    move(&x, 0, find(&x, 0, PLX_PIPE_RECV_GRAD, 0), 0);
    expect_refusal(&x, "stage 0 receives a gradient first", "deadlock");

    /* Stage 1 never sends micro-batch 3's activation. */
    copy_lists(PLX_PIPE_1F1B, 4, 8, 1, &x);
    i = find(&x, 1, PLX_PIPE_SEND_ACT, 3);
    memmove(&x.l[1][i], &x.l[1][i + 1], (size_t)(x.n[1] - i - 1) * sizeof x.l[1][0]);
    x.n[1]--;
    expect_refusal(&x, "a send dropped", "deadlock");

    /* Stage 2 runs a forward before its activation arrived. */
    copy_lists(PLX_PIPE_GPIPE, 4, 8, 1, &x);
    i = find(&x, 2, PLX_PIPE_RECV_ACT, 5);
    move(&x, 2, i, i + 1);
    expect_refusal(&x, "forward before receive", "input activation has not been received");

    /* Interleaved: stage 1 sends to the wrong peer. */
    copy_lists(PLX_PIPE_INTERLEAVED, 4, 8, 2, &x);
    i = find(&x, 1, PLX_PIPE_SEND_ACT, 2);
    x.l[1][i].peer = 3;
    expect_refusal(&x, "wrong peer", "neighbouring virtual stage");

    /* The last stage runs a backward twice and skips another. */
    copy_lists(PLX_PIPE_1F1B, 4, 8, 1, &x);
    x.l[3][find(&x, 3, PLX_PIPE_BACKWARD, 4)].mb = 3;
    expect_refusal(&x, "a backward twice", "backward runs twice");

    /* Stage 0 drops its last backward: it never runs. */
    copy_lists(PLX_PIPE_1F1B, 2, 4, 1, &x);
    x.n[0]--;
    expect_refusal(&x, "a backward missing", "never");
}

static void refusals(void)
{
    struct plx_pipe_schedule *s = NULL;
    CHECK(plx_pipe_schedule_create(PLX_PIPE_INTERLEAVED, 4, 6, 2, &s) == PLX_ERR_INVALID_ARG && !s);
    CHECK(strstr(plx_last_error(), "multiple") != NULL);
    printf("refused: %s\n", plx_last_error());
    CHECK(plx_pipe_schedule_create(PLX_PIPE_INTERLEAVED, 4, 8, 1, &s) == PLX_ERR_INVALID_ARG);
    printf("refused: %s\n", plx_last_error());
    CHECK(plx_pipe_schedule_create(PLX_PIPE_1F1B, 4, 8, 2, &s) == PLX_ERR_INVALID_ARG);
    printf("refused: %s\n", plx_last_error());
    CHECK(plx_pipe_schedule_create(PLX_PIPE_GPIPE, 0, 8, 1, &s) == PLX_ERR_INVALID_ARG);
    CHECK(plx_pipe_schedule_create(7, 2, 2, 1, &s) == PLX_ERR_INVALID_ARG);
    CHECK(plx_pipe_kind_from_name("1f1b") == PLX_PIPE_1F1B && plx_pipe_kind_from_name("nope") == -1);
}

int main(void)
{
    int n = 0;
    for (int S = 1; S <= 16; S++)
        for (int M = 1; M <= 64; M++) {
            prove(PLX_PIPE_GPIPE, S, M, 1);
            prove(PLX_PIPE_1F1B, S, M, 1);
            n += 2;
            for (int V = 2; V <= 4 && M % S == 0; V++, n++)
                prove(PLX_PIPE_INTERLEAVED, S, M, V);
        }
    printf("%d schedules proven; largest |ideal bubble - formula|: gpipe %.3g, 1f1b %.3g, interleaved %.3g\n", n,
           worst_dev[0], worst_dev[1], worst_dev[2]);
    /* The ideal timeline reproduces the formulas exactly for GPipe and 1F1B. */
    CHECK(worst_dev[0] < 1e-9 && worst_dev[1] < 1e-9);
    refusals();
    mutations();
    if (failures)
        fprintf(stderr, "%d checks failed\n", failures);
    return failures ? 1 : 0;
}
