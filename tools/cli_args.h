/* cli_args.h - the command-line tools' numbers, read whole or refused: an
 * argument with anything after its number ("3x"), out of range or empty
 * stops the tool with a message naming the option, never runs with what
 * atoi made of it. Each returns 0, or -1 after saying on stderr
 * "TOOL: OPTION wants ..., not 'ARG'". */
#ifndef PLX_CLI_ARGS_H
#define PLX_CLI_ARGS_H

#include <stddef.h>

/* A whole decimal number from lo to hi. */
int cli_int(const char *tool, const char *opt, const char *arg, long lo, long hi, int *out);
/* A byte count: a whole number or a decimal one with a K, M or G suffix
 * (binary: 1K = 1024), from 0 to 2^62. */
int cli_size(const char *tool, const char *opt, const char *arg, size_t *out);
/* A decimal number greater than above. */
int cli_double_above(const char *tool, const char *opt, const char *arg, double above, double *out);

#endif
