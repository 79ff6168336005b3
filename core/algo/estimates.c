/* estimates.c - the modelled-time table of [core] estimates (estimates.h). */
#include "estimates.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plexus/plexus.h"
#include "table_text.h"

static const char *const coll_names[] = {
#define COLL_NAME(kind, val, name, op, root, v) [val] = name,
    PLX_COLL_MAP(COLL_NAME)
#undef COLL_NAME
};
enum { N_COLLS = sizeof coll_names / sizeof *coll_names };

const char *plx__estimates_coll_name(int coll)
{
    return coll >= 0 && coll < N_COLLS && coll_names[coll] ? coll_names[coll] : "?";
}

int plx__estimates_coll_parse(const char *name)
{
    for (int c = 0; name && c < N_COLLS; c++)
        if (coll_names[c] && !strcmp(name, coll_names[c]))
            return c;
    return -1;
}

/* A finite number of seconds >= 0; 0 or -1. */
static int parse_seconds(const char *s, double *out)
{
    char *end;
    errno = 0;
    *out = strtod(s, &end);
    return errno || end == s || *end || !isfinite(*out) || *out < 0 ? -1 : 0;
}

static int add_row(struct plx__estimates *t, const struct plx__estimate_row *r, int *cap)
{
    if (t->n == *cap) {
        int n = *cap ? 2 * *cap : 64;
        struct plx__estimate_row *rows = realloc(t->rows, (size_t)n * sizeof *rows);
        if (!rows)
            return -1;
        t->rows = rows;
        *cap = n;
    }
    t->rows[t->n++] = *r;
    return 0;
}

/* The backend line: once, before the rows. */
static int parse_backend(struct plx__estimates *t, char **f, int nf, int line, char *err, size_t len)
{
    if (nf != 2 || strlen(f[1]) >= sizeof t->backend)
        return plx__table_fail(err, len, "%s:%d: expected 'backend NAME' (a name under %zu characters)", t->source, line,
                    sizeof t->backend);
    if (t->backend[0] || t->n)
        return plx__table_fail(err, len, "%s:%d: 'backend' must come once, before the rows", t->source, line);
    snprintf(t->backend, sizeof t->backend, "%s", f[1]);
    return 0;
}

/* One non-comment line's fields: the backend or a row; 0 or -1 (err set). */
static int parse_line(struct plx__estimates *t, char *text, int line, int *cap, char *err, size_t len)
{
    char *f[5] = {0};
    int nf = plx__table_fields(text, f, 5);
    if (nf == 0)
        return 0;
    const char *path = t->source;
    if (!strcmp(f[0], "backend"))
        return parse_backend(t, f, nf, line, err, len);
    if (nf != 4)
        return plx__table_fail(err, len, "%s:%d: expected 'COLL RANKS BYTES SECONDS' or 'backend NAME'", path, line);
    struct plx__estimate_row r = {.coll = plx__estimates_coll_parse(f[0]), .line = line};
    unsigned long long ranks, bytes;
    if (r.coll < 0)
        return plx__table_fail(err, len, "%s:%d: COLL '%s' is not a collective (allreduce, allgather, ...)", path, line, f[0]);
    if (plx__table_count(f[1], 1u << 30, &ranks) || ranks < 1)
        return plx__table_fail(err, len, "%s:%d: RANKS '%s' is not a whole number of ranks >= 1", path, line, f[1]);
    if (plx__table_count(f[2], (unsigned long long)SIZE_MAX, &bytes))
        return plx__table_fail(err, len, "%s:%d: BYTES '%s' is not a whole number of bytes", path, line, f[2]);
    if (parse_seconds(f[3], &r.seconds))
        return plx__table_fail(err, len, "%s:%d: SECONDS '%s' is not a number of seconds >= 0", path, line, f[3]);
    r.ranks = (int)ranks;
    r.bytes = (size_t)bytes;
    if (add_row(t, &r, cap))
        return plx__table_fail(err, len, "%s:%d: out of memory", path, line);
    return 0;
}

static int row_order(const void *pa, const void *pb)
{
    const struct plx__estimate_row *a = pa, *b = pb;
    if (a->coll != b->coll)
        return a->coll < b->coll ? -1 : 1;
    if (a->ranks != b->ranks)
        return a->ranks < b->ranks ? -1 : 1;
    if (a->bytes != b->bytes)
        return a->bytes < b->bytes ? -1 : 1;
    return a->line < b->line ? -1 : a->line > b->line;
}

/* Sorted, with every (COLL, RANKS, BYTES) once; 0 or -1 (err names both lines). */
static int sort_rows(struct plx__estimates *t, char *err, size_t len)
{
    qsort(t->rows, (size_t)t->n, sizeof *t->rows, row_order);
    for (int i = 1; i < t->n; i++) {
        const struct plx__estimate_row *a = &t->rows[i - 1], *b = &t->rows[i];
        if (a->coll == b->coll && a->ranks == b->ranks && a->bytes == b->bytes)
            return plx__table_fail(err, len, "%s:%d: %s at %d ranks, %zu B is on line %d already", t->source, b->line,
                        coll_names[b->coll], b->ranks, b->bytes, a->line);
    }
    return 0;
}

/* What plx__table_read hands each line to. */
struct reading {
    struct plx__estimates *t;
    int cap;
};

static int read_line(void *ctx, char *text, int line, char *err, size_t len)
{
    struct reading *r = ctx;
    return parse_line(r->t, text, line, &r->cap, err, len);
}

int plx__estimates_load(struct plx__estimates *t, const char *path, char *err, size_t len)
{
    memset(t, 0, sizeof *t);
    snprintf(t->source, sizeof t->source, "%s", path);
    struct reading r = {.t = t};
    int rc = plx__table_read(path, "estimates table", read_line, &r, err, len);
    if (rc == 0 && t->n == 0)
        rc = plx__table_fail(err, len, "%s: no 'COLL RANKS BYTES SECONDS' rows", path);
    if (rc == 0)
        rc = sort_rows(t, err, len);
    if (rc)
        t->n = 0;
    return rc;
}

void plx__estimates_finish(struct plx__estimates *t)
{
    free(t->rows);
    t->rows = NULL;
    t->n = 0;
}

/* The first row of (coll, ranks), or -1; *end: one past its last. */
static int find_group(const struct plx__estimates *t, int coll, int ranks, int *end)
{
    int i = 0;
    while (i < t->n && (t->rows[i].coll != coll || t->rows[i].ranks != ranks))
        i++;
    if (i == t->n)
        return -1;
    int j = i;
    while (j < t->n && t->rows[j].coll == coll && t->rows[j].ranks == ranks)
        j++;
    *end = j;
    return i;
}

/* "2, 4 and 8": the RANKS of coll's rows, into buf. */
static void ranks_of(const struct plx__estimates *t, int coll, char *buf, size_t len)
{
    size_t at = 0;
    buf[0] = '\0';
    for (int i = 0; i < t->n && at < len; i++)
        if (t->rows[i].coll == coll && (i == 0 || t->rows[i - 1].coll != coll || t->rows[i - 1].ranks != t->rows[i].ranks))
            at += (size_t)snprintf(buf + at, len - at, "%s%d", at ? ", " : "", t->rows[i].ranks);
}

int plx__estimates_lookup(const struct plx__estimates *t, const char *backend, int coll, int ranks, size_t bytes,
                          double *seconds, char *why, size_t len)
{
    if (t->backend[0] && (!backend || strcmp(backend, t->backend)))
        return plx__table_fail(why, len, "%s is a table for backend %s, not %s", t->source, t->backend, backend ? backend : "?");
    int end = 0, i = find_group(t, coll, ranks, &end);
    if (i < 0) {
        char have[200];
        ranks_of(t, coll, have, sizeof have);
        return plx__table_fail(why, len, "%s has no %s rows at %d ranks%s%s%s", t->source, plx__estimates_coll_name(coll), ranks,
                    have[0] ? " (only at " : "", have, have[0] ? ")" : "");
    }
    if (coll == PLX_COLL_BARRIER)
        bytes = 0;
    const struct plx__estimate_row *lo = &t->rows[i], *hi = &t->rows[end - 1];
    if (bytes < lo->bytes || bytes > hi->bytes)
        return plx__table_fail(why, len, "%s covers %s at %d ranks from %zu to %zu B, not %zu B", t->source,
                    plx__estimates_coll_name(coll), ranks, lo->bytes, hi->bytes, bytes);
    while (i + 1 < end && t->rows[i + 1].bytes <= bytes)
        i++;
    const struct plx__estimate_row *a = &t->rows[i];
    if (a->bytes == bytes) {
        *seconds = a->seconds;
        return 0;
    }
    const struct plx__estimate_row *b = &t->rows[i + 1];
    double f = (double)(bytes - a->bytes) / (double)(b->bytes - a->bytes);
    *seconds = a->seconds + f * (b->seconds - a->seconds);
    return 0;
}
