/* cli_args.c - see cli_args.h. */
#include "cli_args.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

int cli_int(const char *tool, const char *opt, const char *arg, long lo, long hi, int *out)
{
    char *end;
    errno = 0;
    long v = strtol(arg, &end, 10);
    if (end == arg || *end || errno || v < lo || v > hi) {
        fprintf(stderr, "%s: %s wants a whole number from %ld to %ld, not '%s'\n", tool, opt, lo, hi, arg);
        return -1;
    }
    *out = (int)v;
    return 0;
}

int cli_size(const char *tool, const char *opt, const char *arg, size_t *out)
{
    char *end;
    errno = 0;
    double v = strtod(arg, &end);
    double unit = 1;
    switch (end != arg ? *end : '\0') {
    case 'K': case 'k': unit = 1024.0; end++; break;
    case 'M': case 'm': unit = 1024.0 * 1024; end++; break;
    case 'G': case 'g': unit = 1024.0 * 1024 * 1024; end++; break;
    default: break;
    }
    v *= unit;
    /* A fraction of a byte is no size: 1.5K is, 1.5 is not. */
    if (end == arg || *end || errno || !(v >= 0) || v > 0x1p62 || v != (double)(unsigned long long)v) {
        fprintf(stderr, "%s: %s wants a byte count (a whole number, or a number with K, M or G), not '%s'\n", tool,
                opt, arg);
        return -1;
    }
    *out = (size_t)v;
    return 0;
}

int cli_double_above(const char *tool, const char *opt, const char *arg, double above, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(arg, &end);
    if (end == arg || *end || errno || !(v > above) || v > 1e300) {
        fprintf(stderr, "%s: %s wants a number above %g, not '%s'\n", tool, opt, above, arg);
        return -1;
    }
    *out = v;
    return 0;
}
