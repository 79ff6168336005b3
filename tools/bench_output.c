/* bench_output.c - plexus-bench's CSV and JSON result files. */
#include "bench_output.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

static FILE *out;
static int json, records;
static const char *path_name;
static struct bench_context C;
static char host[256], cpu[256];

static void read_cpu_model(void)
{
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[512];
    snprintf(cpu, sizeof cpu, "unknown");
    if (!f)
        return;
    while (fgets(line, sizeof line, f)) {
        char *colon = strchr(line, ':');
        if (!strncmp(line, "model name", 10) && colon) {
            snprintf(cpu, sizeof cpu, "%s", colon + 2);
            cpu[strcspn(cpu, "\n")] = '\0';
            break;
        }
    }
    fclose(f);
}

int bench_output_open(const char *format, const char *path)
{
    if (strcmp(format, "csv") && strcmp(format, "json")) {
        fprintf(stderr, "plexus-bench: --output takes csv or json, not '%s'\n", format);
        return -1;
    }
    json = !strcmp(format, "json");
    path_name = path;
    return 0;
}

int bench_output_enabled(void)
{
    return path_name != NULL;
}

/* A JSON string (CSV fields are quoted the same way: no quotes or
 * backslashes survive unescaped, control characters become spaces). */
static void str(const char *s)
{
    fputc('"', out);
    for (; *s; s++) {
        if (json && (*s == '"' || *s == '\\'))
            fprintf(out, "\\%c", *s);
        else if (!json && *s == '"')
            fputs("\"\"", out);
        else
            fputc((unsigned char)*s < 0x20 ? ' ' : *s, out);
    }
    fputc('"', out);
}

void bench_output_begin(const struct bench_context *ctx)
{
    if (!path_name)
        return;
    C = *ctx;
    if (gethostname(host, sizeof host) != 0)
        snprintf(host, sizeof host, "unknown");
    host[sizeof host - 1] = '\0';
    read_cpu_model();
    out = fopen(path_name, "w");
    if (!out) {
        perror(path_name);
        path_name = NULL;
        return;
    }
    if (json) {
        fprintf(out, "{\"tool\": \"plexus-bench\", \"backend\": ");
        str(C.backend);
        fprintf(out, ", \"ranks\": %d, \"hosts\": %d, \"host\": ", C.ranks, C.hosts);
        str(host);
        fprintf(out, ", \"cpu\": ");
        str(cpu);
        fprintf(out, ", \"dtype\": ");
        str(C.dtype);
        fprintf(out, ", \"op\": ");
        str(C.op);
        fprintf(out, ", \"iterations\": %d, \"warmup\": %d, \"checked\": %s,\n \"results\": [", C.iters, C.warmup,
                C.checked ? "true" : "false");
    } else {
        fprintf(out, "tool,backend,ranks,hosts,host,cpu,dtype,op,iterations,warmup,coll,redop,root,place,"
                     "size_bytes,count,time_us,algbw_gbs,busbw_gbs,wrong,memcpy_gbs\n");
    }
}

void bench_output_record(const struct bench_record *r)
{
    if (!out)
        return;
    if (json) {
        fprintf(out, "%s\n  {\"coll\": \"%s\", \"redop\": \"%s\", \"root\": %d, \"place\": \"%s\", \"size_bytes\": %zu, "
                     "\"count\": %zu, \"time_us\": %.4f, \"algbw_gbs\": %.6f, \"busbw_gbs\": %.6f, \"wrong\": ",
                records ? "," : "", r->coll, r->redop, r->root, r->inplace ? "in" : "out", r->bytes, r->count,
                r->time_us, r->algbw_gbs, r->busbw_gbs);
        if (r->wrong >= 0)
            fprintf(out, "%ld", r->wrong);
        else
            fprintf(out, "null");
        if (r->memcpy_gbs >= 0)
            fprintf(out, ", \"memcpy_gbs\": %.4f}", r->memcpy_gbs);
        else
            fprintf(out, ", \"memcpy_gbs\": null}");
    } else {
        fprintf(out, "plexus-bench,");
        str(C.backend);
        fprintf(out, ",%d,%d,", C.ranks, C.hosts);
        str(host);
        fputc(',', out);
        str(cpu);
        fprintf(out, ",%s,%s,%d,%d,%s,%s,%d,%s,%zu,%zu,%.4f,%.6f,%.6f,", C.dtype, C.op, C.iters, C.warmup, r->coll,
                r->redop, r->root, r->inplace ? "in" : "out", r->bytes, r->count, r->time_us, r->algbw_gbs,
                r->busbw_gbs);
        if (r->wrong >= 0)
            fprintf(out, "%ld", r->wrong);
        fputc(',', out);
        if (r->memcpy_gbs >= 0)
            fprintf(out, "%.4f", r->memcpy_gbs);
        fputc('\n', out);
    }
    records++;
    fflush(out);
}

int bench_output_close(void)
{
    if (!out)
        return 0;
    if (json)
        fprintf(out, "\n]}\n");
    int bad = ferror(out);
    if (fclose(out) != 0 || bad) {
        fprintf(stderr, "plexus-bench: writing %s failed\n", path_name);
        out = NULL;
        return -1;
    }
    out = NULL;
    return 0;
}
