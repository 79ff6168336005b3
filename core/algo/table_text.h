/* table_text.h - what the core's line tables ([core] tuner, tuner.c, and
 * [core] estimates, estimates.c) share: the file read line by line ('#'
 * starts a comment, a line over 510 characters is an error), the fields of
 * a line, whole numbers, and "path:line: what is wrong" messages. libc only,
 * like its users (plexus-info reads the same tables). Stability: internal. */
#ifndef PLX_CORE_ALGO_TABLE_TEXT_H
#define PLX_CORE_ALGO_TABLE_TEXT_H

#include <stddef.h>

/* err = the formatted message; returns -1. */
int plx__table_fail(char *err, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* A whole decimal number, at most max, into *out; 0 or -1. */
int plx__table_count(const char *s, unsigned long long max, unsigned long long *out);
/* Split text into at most max blank-separated fields; how many. */
int plx__table_fields(char *text, char **f, int max);
/* Read path ("%s: cannot read the <what>: why" when it cannot), handing each
 * line, comment removed, to row(ctx, text, line, err, len) until one
 * returns nonzero; 0 or -1 with err set. */
int plx__table_read(const char *path, const char *what, int (*row)(void *ctx, char *text, int line, char *err,
                                                                  size_t len),
                    void *ctx, char *err, size_t len);

#endif
