/* pipeline_schedule.c - pipeline schedules as data: for S stages, M
 * micro-batches and V chunks per stage, each stage's ordered list of
 * forwards, backwards and the transfers around them. GPipe and 1F1B follow
 * their papers; the interleaved schedule follows Megatron-LM's
 * forward_backward_pipelining_with_interleaving (Narayanan et al., 2021). */
#include <stdlib.h>
#include <string.h>

#include "pipeline.h"

static const char *const kind_names[] = {"gpipe", "1f1b", "interleaved"};

PLX_API const char *plx_pipe_kind_name(int kind)
{
    return kind >= 0 && kind <= PLX_PIPE_INTERLEAVED ? kind_names[kind] : "unknown";
}

PLX_API int plx_pipe_kind_from_name(const char *name)
{
    for (int k = 0; name && k <= PLX_PIPE_INTERLEAVED; k++)
        if (!strcmp(name, kind_names[k]))
            return k;
    return -1;
}

/* Appends to one stage's list; the capacity (6 V M) is the most a stage can need. */
struct builder {
    struct plx_pipe_schedule *s;
    int stage;
};

static void add(struct builder *b, int op, int chunk, int mb, int peer)
{
    struct plx_pipe_schedule *s = b->s;
    s->lists[b->stage][s->counts[b->stage]++] = (struct plx_pipe_action){op, chunk, mb, peer};
}

/* The forward step of (chunk, mb) with its receive before and send after;
 * the first virtual stage has no input, the last no output. */
static void forward(struct builder *b, int chunk, int mb)
{
    int S = b->s->stages, vs = chunk * S + b->stage, last = S * b->s->chunks - 1;
    if (vs > 0)
        add(b, PLX_PIPE_RECV_ACT, chunk, mb, (b->stage + S - 1) % S);
    add(b, PLX_PIPE_FORWARD, chunk, mb, -1);
    if (vs < last)
        add(b, PLX_PIPE_SEND_ACT, chunk, mb, (b->stage + 1) % S);
}

static void backward(struct builder *b, int chunk, int mb)
{
    int S = b->s->stages, vs = chunk * S + b->stage, last = S * b->s->chunks - 1;
    if (vs < last)
        add(b, PLX_PIPE_RECV_GRAD, chunk, mb, (b->stage + 1) % S);
    add(b, PLX_PIPE_BACKWARD, chunk, mb, -1);
    if (vs > 0)
        add(b, PLX_PIPE_SEND_GRAD, chunk, mb, (b->stage + S - 1) % S);
}

/* GPipe: every forward, then every backward (Huang et al., 2019). */
static void gpipe(struct builder *b)
{
    for (int m = 0; m < b->s->micro_batches; m++)
        forward(b, 0, m);
    for (int m = 0; m < b->s->micro_batches; m++)
        backward(b, 0, m);
}

/* 1F1B (PipeDream-flush, Narayanan et al., 2021): stage s runs S - s - 1
 * warm-up forwards, then alternates one forward and one backward, then
 * drains the backwards, so at most S - s activations are ever stashed. */
static void one_f_one_b(struct builder *b)
{
    int S = b->s->stages, M = b->s->micro_batches;
    int warm = S - b->stage - 1 < M ? S - b->stage - 1 : M;
    for (int m = 0; m < warm; m++)
        forward(b, 0, m);
    for (int i = 0; i < M - warm; i++) {
        forward(b, 0, warm + i);
        backward(b, 0, i);
    }
    for (int m = M - warm; m < M; m++)
        backward(b, 0, m);
}

/* Step k of the V*M forward (or backward) steps: micro-batches go in groups
 * of S through chunk 0, 1, .., V-1 (backward: V-1 .. 0), as in Megatron. */
static void interleaved_step(const struct plx_pipe_schedule *s, int k, int is_forward, int *chunk, int *mb)
{
    int S = s->stages, V = s->chunks, group = S * V;
    int in_group = k % group;
    *chunk = in_group / S;
    if (!is_forward)
        *chunk = V - 1 - *chunk;
    *mb = (k / group) * S + in_group % S;
}

/* Megatron's warm-up: (S - s - 1) * 2 + (V - 1) * S forward steps (at most
 * all of them), then one forward one backward, then the remaining backwards. */
static void interleaved(struct builder *b)
{
    const struct plx_pipe_schedule *s = b->s;
    int S = s->stages, total = s->chunks * s->micro_batches, c, m;
    int warm = (S - b->stage - 1) * 2 + (s->chunks - 1) * S;
    if (warm > total)
        warm = total;
    for (int k = 0; k < warm; k++) {
        interleaved_step(s, k, 1, &c, &m);
        forward(b, c, m);
    }
    for (int i = 0; i < total - warm; i++) {
        interleaved_step(s, warm + i, 1, &c, &m);
        forward(b, c, m);
        interleaved_step(s, i, 0, &c, &m);
        backward(b, c, m);
    }
    for (int k = total - warm; k < total; k++) {
        interleaved_step(s, k, 0, &c, &m);
        backward(b, c, m);
    }
}

static int check_shape(int kind, int S, int M, int V)
{
    const char *name = plx_pipe_kind_name(kind);
    if (kind < 0 || kind > PLX_PIPE_INTERLEAVED)
        return plx_set_error(PLX_ERR_INVALID_ARG, "plx_pipe_schedule_create: unknown schedule kind %d", kind);
    if (S < 1 || S > 1024 || M < 1 || M > 65536 || V < 1 || V > 64)
        return plx_set_error(PLX_ERR_INVALID_ARG,
                        "plx_pipe_schedule_create(%s): %d stages, %d micro-batches, %d chunks (limits: stages 1 .. "
                        "1024, micro-batches 1 .. 65536, chunks 1 .. 64)", name, S, M, V);
    if ((long long)S * V * M > (1LL << 22))
        return plx_set_error(PLX_ERR_INVALID_ARG,
                        "plx_pipe_schedule_create(%s): %d x %d x %d stage-chunk-micro-batches (at most 2^22)", name, S, V,
                        M);
    if (kind != PLX_PIPE_INTERLEAVED && V != 1)
        return plx_set_error(PLX_ERR_INVALID_ARG,
                        "plx_pipe_schedule_create(%s): %d chunks per stage, but %s runs one (use interleaved)", name,
                        V, name);
    if (kind == PLX_PIPE_INTERLEAVED && V < 2)
        return plx_set_error(PLX_ERR_INVALID_ARG,
                        "plx_pipe_schedule_create(interleaved): %d chunk per stage (it needs 2 or more; use 1f1b)", V);
    if (kind == PLX_PIPE_INTERLEAVED && M % S)
        return plx_set_error(PLX_ERR_INVALID_ARG,
                        "plx_pipe_schedule_create(interleaved): %d micro-batches is not a multiple of the %d stages "
                        "(micro-batches go through each chunk in groups of S)", M, S);
    return 0;
}

PLX_API int plx_pipe_schedule_create(int kind, int stages, int micro_batches, int chunks,
                                     struct plx_pipe_schedule **out)
{
    if (!out)
        return plx_set_error(PLX_ERR_INVALID_ARG, "plx_pipe_schedule_create: out is NULL");
    *out = NULL;
    int rc = check_shape(kind, stages, micro_batches, chunks);
    if (rc)
        return rc;
    struct plx_pipe_schedule *s = calloc(1, sizeof *s);
    if (!s)
        return plx_set_error(PLX_ERR_NOMEM, "plx_pipe_schedule_create: out of memory");
    *s = (struct plx_pipe_schedule){.kind = kind, .stages = stages, .micro_batches = micro_batches, .chunks = chunks};
    s->lists = calloc((size_t)stages, sizeof *s->lists);
    s->counts = calloc((size_t)stages, sizeof *s->counts);
    size_t per_stage = 6 * (size_t)chunks * (size_t)micro_batches; /* F, B and up to two transfers each */
    for (int st = 0; s->lists && s->counts && st < stages; st++)
        if (!(s->lists[st] = malloc(per_stage * sizeof **s->lists)))
            break;
    if (!s->lists || !s->counts || !s->lists[stages - 1]) {
        plx_pipe_schedule_destroy(s);
        return plx_set_error(PLX_ERR_NOMEM, "plx_pipe_schedule_create: out of memory for %d x %zu actions", stages,
                        per_stage);
    }
    for (int st = 0; st < stages; st++) {
        struct builder b = {s, st};
        if (kind == PLX_PIPE_GPIPE)
            gpipe(&b);
        else if (kind == PLX_PIPE_1F1B)
            one_f_one_b(&b);
        else
            interleaved(&b);
    }
    *out = s;
    return 0;
}

PLX_API void plx_pipe_schedule_destroy(struct plx_pipe_schedule *s)
{
    if (!s)
        return;
    for (int st = 0; s->lists && st < s->stages; st++)
        free(s->lists[st]);
    free(s->lists);
    free(s->counts);
    free(s);
}

PLX_API int plx_pipe_schedule_actions(const struct plx_pipe_schedule *s, int stage,
                                      const struct plx_pipe_action **actions, int *count)
{
    if (!s || !actions || !count)
        return plx_set_error(PLX_ERR_INVALID_ARG, "plx_pipe_schedule_actions: schedule, actions or count is NULL");
    if (stage < 0 || stage >= s->stages)
        return plx_set_error(PLX_ERR_INVALID_ARG, "plx_pipe_schedule_actions: stage %d of %d", stage, s->stages);
    *actions = s->lists[stage];
    *count = s->counts[stage];
    return 0;
}

PLX_API int plx_pipe_schedule_shape(const struct plx_pipe_schedule *s, int *kind, int *stages, int *micro_batches,
                                    int *chunks)
{
    if (!s)
        return plx_set_error(PLX_ERR_INVALID_ARG, "plx_pipe_schedule_shape: schedule is NULL");
    if (kind)
        *kind = s->kind;
    if (stages)
        *stages = s->stages;
    if (micro_batches)
        *micro_batches = s->micro_batches;
    if (chunks)
        *chunks = s->chunks;
    return 0;
}

PLX_API int plx_pipe_schedule_check(const struct plx_pipe_schedule *s, double fwd_cost, double bwd_cost,
                                    struct plx_pipe_stats *stats)
{
    if (!s)
        return plx_set_error(PLX_ERR_INVALID_ARG, "plx_pipe_schedule_check: schedule is NULL");
    return plx_pipe_check_lists(s->stages, s->micro_batches, s->chunks, (const struct plx_pipe_action *const *)s->lists,
                                s->counts, fwd_cost, bwd_cost, stats);
}
