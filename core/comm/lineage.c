/* lineage.c - the names and store key roots of communicators made from
 * others (split, shrink, grow): each appends its step to its parent's.
 * A long elastic job rebuilds its communicator again and again; the chain
 * must neither outgrow a fixed buffer (a truncated key root is the
 * previous generation's, whose keys are read back) nor become unreadable.
 * Past a bound the parent's part becomes its first component and a digest
 * of the whole: every rank derives the same, each generation a new one. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "comm.h"
#include "hostid.h"

enum { NAME_MAX_CHARS = 128, ROOT_MAX_CHARS = 256 };

static void child_of(char *out, size_t n, const char *parent, const char *suffix, size_t bound)
{
    if (strlen(parent) + strlen(suffix) <= bound) {
        snprintf(out, n, "%s%s", parent, suffix);
        return;
    }
    size_t head = strcspn(parent, "/");
    if (head > 32)
        head = 32;
    snprintf(out, n, "%.*s/~%016llx%s", (int)head, parent, (unsigned long long)plx__str_digest(parent), suffix);
}

void plx__child_name(char *out, size_t n, const char *parent, const char *suffix)
{
    child_of(out, n, parent, suffix, NAME_MAX_CHARS);
}

void plx__child_key_root(char *out, size_t n, const char *parent, const char *suffix)
{
    child_of(out, n, parent, suffix, ROOT_MAX_CHARS);
}
