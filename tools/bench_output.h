/* bench_output.h - plexus-bench's machine-readable results (--output
 * csv|json FILE): one record per collective, size and in/out of place,
 * with the run's context (backend, ranks, hosts, host name, CPU model). */
#ifndef PLEXUS_BENCH_OUTPUT_H
#define PLEXUS_BENCH_OUTPUT_H

#include <stddef.h>

struct bench_context {
    const char *backend, *dtype, *op;
    int ranks, hosts, iters, warmup, checked;
};

struct bench_record {
    const char *coll, *redop;
    int inplace, root;
    size_t bytes, count;
    double time_us, algbw_gbs, busbw_gbs, memcpy_gbs; /* memcpy_gbs < 0: not measured */
    long wrong;                                        /* < 0: not checked */
};

/* "csv" or "json"; 0, or -1 with a message on stderr. */
int bench_output_open(const char *format, const char *path);
int bench_output_enabled(void);
void bench_output_begin(const struct bench_context *ctx);
void bench_output_record(const struct bench_record *r);
/* Writes what is left (JSON's closing) and closes; 0, or -1 on a write error. */
int bench_output_close(void);

#endif
