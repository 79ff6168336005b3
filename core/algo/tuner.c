/* tuner.c - the allreduce crossover table of [core] tuner (tuner.h). */
#include "tuner.h"

#include "table_text.h"

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

/* One non-comment line's fields into a row; 0 or -1 (err set). */
static int parse_row(void *ctx, char *text, int line, char *err, size_t len)
{
    struct plx__tuner *t = ctx;
    char *f[5] = {0};
    int nf = plx__table_fields(text, f, 5);
    if (nf == 0)
        return 0;
    const char *path = t->source;
    if (nf != 4 || strcmp(f[0], "allreduce"))
        return plx__table_fail(err, len, "%s:%d: expected 'allreduce RANKS FROM_BYTES ALGORITHM'", path, line);
    unsigned long long ranks, from;
    if (plx__table_count(f[1], 1u << 30, &ranks) || ranks < 1)
        return plx__table_fail(err, len, "%s:%d: RANKS '%s' is not a whole number of ranks >= 1", path, line, f[1]);
    if (plx__table_count(f[2], (unsigned long long)SIZE_MAX, &from))
        return plx__table_fail(err, len, "%s:%d: FROM_BYTES '%s' is not a whole number of bytes", path, line, f[2]);
    int algo = plx__tuner_algo_parse(f[3]);
    if (!algo)
        return plx__table_fail(err, len, "%s:%d: ALGORITHM '%s' is not one of ring, recdbl, tree, rabenseifner", path, line,
                    f[3]);
    if (t->n == PLX__TUNER_ROWS)
        return plx__table_fail(err, len, "%s:%d: more than %d rows", path, line, PLX__TUNER_ROWS);
    if (t->n) {
        const struct plx__tuner_row *last = &t->rows[t->n - 1];
        if ((int)ranks < last->ranks || ((int)ranks == last->ranks && from <= last->from_bytes))
            return plx__table_fail(err, len, "%s:%d: rows must ascend by RANKS, then by FROM_BYTES (line %d: %d ranks from %zu B)",
                        path, line, last->line, last->ranks, last->from_bytes);
    }
    t->rows[t->n++] = (struct plx__tuner_row){.ranks = (int)ranks, .algo = algo, .line = line, .from_bytes = from};
    return 0;
}

int plx__tuner_load(struct plx__tuner *t, const char *path, char *err, size_t len)
{
    memset(t, 0, sizeof *t);
    snprintf(t->source, sizeof t->source, "%s", path);
    int rc = plx__table_read(path, "tuning table", parse_row, t, err, len);
    if (rc == 0 && t->n == 0)
        rc = plx__table_fail(err, len, "%s: no 'allreduce RANKS FROM_BYTES ALGORITHM' rows", path);
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
