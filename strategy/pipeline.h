/* pipeline.h - what the pipeline files share: the schedule's layout and the
 * virtual-stage arithmetic. Stability: internal. */
#ifndef PLX_STRATEGY_PIPELINE_H
#define PLX_STRATEGY_PIPELINE_H

#include <string.h>

#include "plexus/parallel.h"

struct plx_pipe_schedule {
    int kind, stages, micro_batches, chunks;
    struct plx_pipe_action **lists; /* lists[stage]: counts[stage] actions */
    int *counts;
};

/* Chunk c of stage s is virtual stage c * S + s. */
static inline int plx__pipe_vstage(int S, int stage, int chunk)
{
    return chunk * S + stage;
}

static inline const char *plx__pipe_op_name(int op)
{
    static const char *const names[] = {"forward", "backward", "send-activation", "recv-activation", "send-gradient",
                                        "recv-gradient"};
    return op >= 0 && op <= PLX_PIPE_RECV_GRAD ? names[op] : "unknown-op";
}

/* Write src as element i of the caller's stats array, whose elements are
 * stats[0].struct_size bytes apart (0: this header's size); only the fields
 * inside that size are written (an older caller's smaller struct). */
static inline void plx__pipe_stats_put(struct plx_pipe_stats *stats, int i, const struct plx_pipe_stats *src)
{
    size_t size = stats->struct_size && stats->struct_size < sizeof *src ? stats->struct_size : sizeof *src;
    size_t stride = stats->struct_size ? stats->struct_size : sizeof *src;
    struct plx_pipe_stats v = *src;
    v.struct_size = (uint32_t)stride;
    memcpy((char *)stats + (size_t)i * stride, &v, size);
}

#endif
