/* hostid.c - this host's identity for shared memory, the machine's for
 * tcp's spin, its usable cores, and the string digest both use (hostid.h). */
#include "hostid.h"

#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void read_line(const char *path, char *out, size_t len)
{
    out[0] = '\0';
    FILE *f = fopen(path, "re");
    if (!f)
        return;
    if (fgets(out, (int)len, f))
        out[strcspn(out, "\n")] = '\0';
    fclose(f);
}

static unsigned long long ns_inode(const char *which)
{
    char path[64];
    struct stat st;
    snprintf(path, sizeof path, "/proc/self/ns/%s", which);
    return stat(path, &st) == 0 ? (unsigned long long)st.st_ino : 0;
}

/* FNV-1a's step; the offset basis is the one hier.c's host digests have
 * always used (one digit short of the published one: harmless, and the
 * same on every rank of every version). */
uint64_t plx__str_digest(const char *s)
{
    uint64_t h = 1469598103934665603u;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211u;
    return h;
}

uint64_t plx_common_machine_id(void)
{
    char boot[64];
    read_line("/proc/sys/kernel/random/boot_id", boot, sizeof boot);
    return boot[0] ? plx__str_digest(boot) | 1 : 0;
}

int plx_common_usable_cores(void)
{
    cpu_set_t aff;
    if (sched_getaffinity(0, sizeof aff, &aff) == 0 && CPU_COUNT(&aff) > 0)
        return CPU_COUNT(&aff);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

void plx_common_host_identity(char *out, size_t len)
{
    char boot[64], uts[128];
    read_line("/proc/sys/kernel/random/boot_id", boot, sizeof boot);
    if (gethostname(uts, sizeof uts) != 0)
        uts[0] = '\0';
    uts[sizeof uts - 1] = '\0';
    snprintf(out, len, "boot=%s host=%s netns=%llu pidns=%llu uid=%u", boot[0] ? boot : "?", uts,
             ns_inode("net"), ns_inode("pid"), (unsigned)getuid());
}
