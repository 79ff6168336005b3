/* liveness.c - is a rank's process gone? Under srun without -K a task that
 * exits leaves the others of its step waiting out their whole timeout:
 * Slurm ends the step only when all have exited. The tasks of a step on
 * one node are children of one slurmstepd and SLURM_GTIDS lists their
 * task ids, so a rank can see which of its node's tasks have exited (or
 * were reaped). The store's client asks while it waits for a server that
 * does not answer; plx_comm_init while it waits in the store, and says so
 * there for the ranks on other nodes (core/comm/comm.c). */
#include <ctype.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "liveness.h"

/* The parent and state of process pid ('Z': exited, not yet reaped). */
static int proc_stat(long pid, long *ppid, char *state)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *p = strrchr(buf, ')'); /* the command may hold spaces and parentheses */
    return p && sscanf(p + 1, " %c %ld", state, ppid) == 2 ? 0 : -1;
}

/* SLURM_PROCID in pid's environment, or -1. Read whole: a large
 * environment may put it far in. */
static long task_of(long pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%ld/environ", pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    static const char want[] = "SLURM_PROCID=";
    long task = -1;
    size_t at = 0; /* position within the current variable */
    char digits[16];
    size_t nd = 0;
    int in_value = 0, c;
    while (task < 0 && (c = getc(f)) != EOF) {
        if (c == '\0') {
            if (in_value && nd > 0) {
                digits[nd] = '\0';
                task = strtol(digits, NULL, 10);
            }
            at = nd = 0;
            in_value = 0;
        } else if (in_value) {
            if (nd + 1 < sizeof digits)
                digits[nd++] = (char)c;
        } else if (at < sizeof want - 1 && c == want[at]) {
            in_value = ++at == sizeof want - 1;
        } else {
            at = sizeof want; /* another variable: skip to its end */
        }
    }
    fclose(f);
    return task;
}

static int parent_is_slurmstepd(long ppid)
{
    char path[64], comm[64] = "";
    snprintf(path, sizeof path, "/proc/%ld/comm", ppid);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    int ok = fgets(comm, sizeof comm, f) && !strncmp(comm, "slurmstepd", 10);
    fclose(f);
    return ok;
}

/* Mark in alive[] (ntasks) the tasks among parent's live children. */
static void live_tasks(long parent, unsigned char *alive, long ntasks)
{
    DIR *d = opendir("/proc");
    for (struct dirent *e; d && (e = readdir(d));) {
        if (!isdigit((unsigned char)e->d_name[0]))
            continue;
        long pid = strtol(e->d_name, NULL, 10), pp = 0;
        char state = 0;
        if (proc_stat(pid, &pp, &state) != 0 || pp != parent || state == 'Z' || state == 'X')
            continue;
        long t = task_of(pid);
        if (t >= 0 && t < ntasks)
            alive[t] = 1;
    }
    if (d)
        closedir(d);
}

long plx__liveness_local(void)
{
    const char *gtids = getenv("SLURM_GTIDS"), *me = getenv("SLURM_PROCID"), *nt = getenv("SLURM_STEP_NUM_TASKS");
    long parent = (long)getppid(), ntasks = nt ? strtol(nt, NULL, 10) : 0;
    if (!gtids || !me || ntasks <= 0 || ntasks > 1 << 20 || !parent_is_slurmstepd(parent))
        return -1;
    unsigned char *alive = calloc((size_t)ntasks, 1);
    if (!alive)
        return -1;
    live_tasks(parent, alive, ntasks);
    long gone = -1;
    char *end;
    for (const char *p = gtids; *p && gone < 0; p = *end ? end + 1 : end) {
        long t = strtol(p, &end, 10);
        if (end == p)
            break;
        if (t >= 0 && t < ntasks && t != strtol(me, NULL, 10) && !alive[t])
            gone = t;
    }
    free(alive);
    return gone;
}
