/* tuner.c - the allreduce crossover table of [core] tuner (tuner.h). */
#include "tuner.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Indexed by enum plx__allreduce_algo (algo.h); AUTO is no table entry. */
static const char *const algo_names[] = {"auto", "ring", "recdbl", "tree", "rabenseifner"};
enum { N_ALGOS = sizeof algo_names / sizeof *algo_names };

const char *plx__tuner_algo_name(int algo)
{
    return algo >= 0 && algo < N_ALGOS ? algo_names[algo] : "auto";
}

int plx__tuner_algo_parse(const char *name)
{
    for (int a = 1; name && a < N_ALGOS; a++)
        if (!strcmp(name, algo_names[a]))
            return a;
    return 0;
}

static int fail(char *err, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(char *err, size_t len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, len, fmt, ap);
    va_end(ap);
    return -1;
}

/* A whole decimal number, at most max; 0 or -1. */
static int parse_count(const char *s, unsigned long long max, unsigned long long *out)
{
    char *end;
    if (!s || *s < '0' || *s > '9')
        return -1;
    errno = 0;
    *out = strtoull(s, &end, 10);
    return errno || *end || *out > max ? -1 : 0;
}

/* One non-comment line's fields into a row; 0 or -1 (err set). */
static int parse_row(struct plx__tuner *t, char *text, int line, char *err, size_t len)
{
    char *save = NULL, *f[5] = {0};
    int nf = 0;
    for (char *w = strtok_r(text, " \t\r\n", &save); w && nf < 5; w = strtok_r(NULL, " \t\r\n", &save))
        f[nf++] = w;
    if (nf == 0)
        return 0;
    const char *path = t->source;
    if (nf != 4 || strcmp(f[0], "allreduce"))
        return fail(err, len, "%s:%d: expected 'allreduce RANKS FROM_BYTES ALGORITHM'", path, line);
    unsigned long long ranks, from;
    if (parse_count(f[1], 1u << 30, &ranks) || ranks < 1)
        return fail(err, len, "%s:%d: RANKS '%s' is not a whole number of ranks >= 1", path, line, f[1]);
    if (parse_count(f[2], (unsigned long long)SIZE_MAX, &from))
        return fail(err, len, "%s:%d: FROM_BYTES '%s' is not a whole number of bytes", path, line, f[2]);
    int algo = plx__tuner_algo_parse(f[3]);
    if (!algo)
        return fail(err, len, "%s:%d: ALGORITHM '%s' is not one of ring, recdbl, tree, rabenseifner", path, line,
                    f[3]);
    if (t->n == PLX__TUNER_ROWS)
        return fail(err, len, "%s:%d: more than %d rows", path, line, PLX__TUNER_ROWS);
    if (t->n) {
        const struct plx__tuner_row *last = &t->rows[t->n - 1];
        if ((int)ranks < last->ranks || ((int)ranks == last->ranks && from <= last->from_bytes))
            return fail(err, len, "%s:%d: rows must ascend by RANKS, then by FROM_BYTES (line %d: %d ranks from %zu B)",
                        path, line, last->line, last->ranks, last->from_bytes);
    }
    t->rows[t->n++] = (struct plx__tuner_row){.ranks = (int)ranks, .algo = algo, .line = line, .from_bytes = from};
    return 0;
}

int plx__tuner_load(struct plx__tuner *t, const char *path, char *err, size_t len)
{
    memset(t, 0, sizeof *t);
    snprintf(t->source, sizeof t->source, "%s", path);
    FILE *f = fopen(path, "r");
    if (!f)
        return fail(err, len, "%s: cannot read the tuning table: %s", path, strerror(errno));
    char text[512];
    int line = 0, rc = 0;
    while (rc == 0 && fgets(text, sizeof text, f)) {
        line++;
        if (!strchr(text, '\n') && !feof(f)) {
            rc = fail(err, len, "%s:%d: line longer than %zu characters", path, line, sizeof text - 2);
            break;
        }
        char *hash = strchr(text, '#');
        if (hash)
            *hash = '\0';
        rc = parse_row(t, text, line, err, len);
    }
    fclose(f);
    if (rc == 0 && t->n == 0)
        rc = fail(err, len, "%s: no 'allreduce RANKS FROM_BYTES ALGORITHM' rows", path);
    if (rc)
        t->n = 0;
    return rc;
}

int plx__tuner_pick(const struct plx__tuner *t, int ranks, size_t bytes, int *line)
{
    if (t->n == 0)
        return 0;
    /* The rows' group: the largest RANKS <= ranks, else the smallest. */
    int group = t->rows[0].ranks;
    for (int i = 0; i < t->n; i++)
        if (t->rows[i].ranks <= ranks)
            group = t->rows[i].ranks;
    const struct plx__tuner_row *pick = NULL;
    for (int i = 0; i < t->n; i++) {
        const struct plx__tuner_row *r = &t->rows[i];
        if (r->ranks == group && (!pick || r->from_bytes <= bytes))
            pick = r;
    }
    *line = pick->line;
    return pick->algo;
}
