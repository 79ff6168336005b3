/* table_text.c - reading the core's line tables (table_text.h). */
#include "table_text.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int plx__table_fail(char *err, size_t len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, len, fmt, ap);
    va_end(ap);
    return -1;
}

int plx__table_count(const char *s, unsigned long long max, unsigned long long *out)
{
    char *end;
    if (!s || *s < '0' || *s > '9')
        return -1;
    errno = 0;
    *out = strtoull(s, &end, 10);
    return errno || *end || *out > max ? -1 : 0;
}

int plx__table_fields(char *text, char **f, int max)
{
    char *save = NULL;
    int n = 0;
    for (char *w = strtok_r(text, " \t\r\n", &save); w && n < max; w = strtok_r(NULL, " \t\r\n", &save))
        f[n++] = w;
    return n;
}

int plx__table_read(const char *path, const char *what, int (*row)(void *ctx, char *text, int line, char *err,
                                                                  size_t len),
                    void *ctx, char *err, size_t len)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return plx__table_fail(err, len, "%s: cannot read the %s: %s", path, what, strerror(errno));
    char text[512];
    int line = 0, rc = 0;
    while (rc == 0 && fgets(text, sizeof text, f)) {
        line++;
        if (!strchr(text, '\n') && !feof(f)) {
            rc = plx__table_fail(err, len, "%s:%d: line longer than %zu characters", path, line, sizeof text - 2);
            break;
        }
        char *hash = strchr(text, '#');
        if (hash)
            *hash = '\0';
        rc = row(ctx, text, line, err, len) ? -1 : 0;
    }
    if (rc == 0 && ferror(f))
        rc = plx__table_fail(err, len, "%s: cannot read the %s: %s", path, what, strerror(errno));
    fclose(f);
    return rc;
}
