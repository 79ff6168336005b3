/* plexus-top - where every rank of the jobs on this host is, read live
 * from the ledgers the ranks keep (plexus/ledger.h), so it works
 * while a rank is wedged inside a backend or stopped with SIGSTOP: it
 * reads memory the rank wrote, and asks the rank nothing.
 *
 *   plexus-top [--dir DIR] [--job TEXT] [--once] [--interval MS] [--all]
 *
 * --all also lists ledgers whose process is gone (killed before it could
 * remove its file; the core deletes those when it next opens a ledger).
 *
 * Per communicator: each rank's process state, its last completed
 * operation, the operation it is in and for how long, and who is behind. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli_args.h"
#include "plexus/ledger.h"
#include "plexus/plexus.h" /* PLX_COLL_MAP: the names of the collectives */

static const char *const colls[PLX_COLL_COUNT] = {
#define COLL_NAME(kind, val, name, op, root, v) [val] = name,
    PLX_COLL_MAP(COLL_NAME)
#undef COLL_NAME
};
static const char *const states[] = {[PLX_LEDGER_EMPTY] = "-", [PLX_LEDGER_POSTED] = "posted",
                                     [PLX_LEDGER_RUNNING] = "running", [PLX_LEDGER_DONE] = "done",
                                     [PLX_LEDGER_FAILED] = "failed"};

struct rank_view {
    struct plx_ledger_file head;
    struct plx_ledger_entry cur; /* the oldest operation not done (state 0: none) */
    struct plx_ledger_entry last; /* the newest done */
    char proc[16];
};

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* A consistent copy of entry e (seqlock); 0 if it kept changing. */
static int read_entry(const struct plx_ledger_entry *e, struct plx_ledger_entry *out)
{
    for (int tries = 0; tries < 1000; tries++) {
        uint32_t l1 = __atomic_load_n(&e->lock, __ATOMIC_ACQUIRE);
        if (l1 & 1)
            continue;
        memcpy(out, (const void *)e, sizeof *out);
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        if (__atomic_load_n(&e->lock, __ATOMIC_RELAXED) == l1)
            return 1;
    }
    return 0;
}

/* running, stopped (SIGSTOP), gone (a stale file), from /proc. */
static void proc_state(int pid, char *out, size_t len)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f || !fgets(buf, sizeof buf, f)) {
        snprintf(out, len, "gone");
        if (f)
            fclose(f);
        return;
    }
    fclose(f);
    const char *p = strrchr(buf, ')');
    char st = p && p[1] ? p[2] : '?';
    snprintf(out, len, "%s", st == 'T' || st == 't' ? "stopped" : st == 'Z' ? "zombie" : "alive");
}

static int load(const char *path, struct rank_view *v)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    struct stat st;
    if (fstat(fd, &st) != 0 || (size_t)st.st_size < sizeof(struct plx_ledger_file)) {
        close(fd);
        return 0;
    }
    const struct plx_ledger_file *f = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    if (f == MAP_FAILED)
        return 0;
    int ok = !memcmp(f->magic, PLX_LEDGER_MAGIC, 8) && f->version == PLX_LEDGER_VERSION && f->nentries &&
             sizeof *f + (size_t)f->nentries * sizeof f->entries[0] <= (size_t)st.st_size;
    if (ok) {
        memcpy(&v->head, f, sizeof v->head);
        uint64_t done1 = __atomic_load_n(&f->done1, __ATOMIC_ACQUIRE);
        memset(&v->cur, 0, sizeof v->cur);
        memset(&v->last, 0, sizeof v->last);
        if (done1 && !read_entry(&f->entries[(done1 - 1) % f->nentries], &v->last))
            memset(&v->last, 0, sizeof v->last);
        /* The oldest posted operation that is not done. */
        uint64_t posted1 = __atomic_load_n(&f->posted1, __ATOMIC_ACQUIRE);
        for (uint64_t s = done1; s < posted1 && s + f->nentries >= posted1; s++) {
            struct plx_ledger_entry e;
            if (read_entry(&f->entries[s % f->nentries], &e) && e.seq == s && e.state != PLX_LEDGER_DONE) {
                v->cur = e;
                break;
            }
        }
        proc_state(f->pid, v->proc, sizeof v->proc);
    }
    munmap((void *)f, (size_t)st.st_size);
    return ok;
}

static void human(uint64_t b, char *out, size_t len)
{
    if (b >= (1u << 20))
        snprintf(out, len, "%.1f MiB", (double)b / (1 << 20));
    else if (b >= 1024)
        snprintf(out, len, "%.1f KiB", (double)b / 1024);
    else
        snprintf(out, len, "%llu B", (unsigned long long)b);
}

static int cmp_view(const void *a, const void *b)
{
    const struct rank_view *x = a, *y = b;
    int c = strcmp(x->head.job, y->head.job);
    if (!c)
        c = strcmp(x->head.comm, y->head.comm);
    return c ? c : x->head.rank - y->head.rank;
}

static void print_group(struct rank_view *v, int n, uint64_t now)
{
    printf("job %s  comm '%s'  backend %s  %d of %d ranks on this host\n", v[0].head.job, v[0].head.comm,
           v[0].head.backend, n, v[0].head.size);
    printf("  %-5s %-8s %-8s %-12s %-40s %s\n", "rank", "pid", "process", "last done", "current operation", "for");
    uint64_t newest = 0, least = UINT64_MAX;
    for (int i = 0; i < n; i++) {
        uint64_t in = v[i].cur.state ? v[i].cur.seq + 1 : 0;
        if (in > newest)
            newest = in;
        if (v[i].head.done1 < least)
            least = v[i].head.done1;
    }
    for (int i = 0; i < n; i++) {
        char last[32] = "-", cur[96] = "-", waited[32] = "", b[32];
        if (v[i].head.done1)
            snprintf(last, sizeof last, "#%llu", (unsigned long long)(v[i].head.done1 - 1));
        const struct plx_ledger_entry *e = &v[i].cur;
        if (e->state) {
            human(e->bytes, b, sizeof b);
            snprintf(cur, sizeof cur, "#%llu %s %s %s", (unsigned long long)e->seq,
                     e->coll >= 0 && e->coll < PLX_COLL_COUNT ? colls[e->coll] : "?", b,
                     e->state < sizeof states / sizeof states[0] ? states[e->state] : "?");
            if (now > e->start_ns)
                snprintf(waited, sizeof waited, "%.1f s", (double)(now - e->start_ns) * 1e-9);
        }
        printf("  %-5d %-8d %-8s %-12s %-40s %s\n", v[i].head.rank, v[i].head.pid, v[i].proc, last, cur, waited);
    }
    /* Behind: ranks that have not entered the newest operation another rank is in. */
    if (newest) {
        int any = 0;
        for (int i = 0; i < n; i++) {
            uint64_t in = v[i].cur.state ? v[i].cur.seq + 1 : v[i].head.done1;
            if (in < newest) {
                char done[32] = "nothing";
                if (v[i].head.done1)
                    snprintf(done, sizeof done, "#%llu", (unsigned long long)(v[i].head.done1 - 1));
                printf("%s rank %d (%s, last completed %s) has not entered #%llu", any ? ";" : "  behind:",
                       v[i].head.rank, v[i].proc, done, (unsigned long long)(newest - 1));
                any = 1;
            }
        }
        printf("%s\n", any ? "" : "  behind: nobody (every rank is in the newest operation or done)");
    }
    (void)least;
}

static void default_dir(char *out, size_t len)
{
    const char *xdg = getenv("XDG_RUNTIME_DIR"), *env = getenv("PLEXUS_CORE_LEDGER_DIR");
    if (env && *env)
        snprintf(out, len, "%s", env);
    else if (xdg && *xdg)
        snprintf(out, len, "%s/plexus", xdg);
    else
        snprintf(out, len, "/tmp/plexus-%u", (unsigned)getuid());
}

static int show_all;
static int dir_given; /* --dir: a folder that cannot be read is an error, not "no job" */

static int snapshot(const char *dir, const char *job)
{
    DIR *d = opendir(dir);
    if (!d && (dir_given || errno != ENOENT)) {
        fprintf(stderr, "plexus-top: cannot read the folder %s: %s\n", dir, strerror(errno));
        return 2;
    }
    if (!d) {
        printf("no ledgers in %s (no plexus job of this user on this host)\n", dir);
        return 1;
    }
    int unread = 0; /* named *.ledger but not one this plexus-top reads */
    int cap = 64, n = 0;
    struct rank_view *v = malloc((size_t)cap * sizeof *v);
    for (struct dirent *e; v && (e = readdir(d));) {
        size_t l = strlen(e->d_name);
        if (l < 8 || strcmp(e->d_name + l - 7, ".ledger"))
            continue;
        if (n == cap) {
            struct rank_view *nv = realloc(v, (size_t)(cap *= 2) * sizeof *v);
            if (!nv)
                break;
            v = nv;
        }
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (!load(path, &v[n])) {
            if (access(path, F_OK) == 0) /* not one whose job ended as we read */
                unread++;
        }
        else if ((!job || strstr(v[n].head.job, job)) && (show_all || strcmp(v[n].proc, "gone")))
            n++;
    }
    closedir(d);
    if (unread)
        fprintf(stderr, "plexus-top: %d file(s) named *.ledger in %s are not ledgers of version %d (another plexus "
                "version's, damaged, or just being made): not shown\n", unread, dir, PLX_LEDGER_VERSION);
    if (!v || n == 0) {
        printf("no live ledgers in %s\n", dir);
        free(v);
        return 1;
    }
    qsort(v, (size_t)n, sizeof *v, cmp_view);
    uint64_t now = now_ns();
    for (int i = 0, j; i < n; i = j) {
        for (j = i + 1; j < n && !strcmp(v[j].head.job, v[i].head.job) && !strcmp(v[j].head.comm, v[i].head.comm);)
            j++;
        print_group(v + i, j - i, now);
    }
    free(v);
    return 0;
}

int main(int argc, char **argv)
{
    char dir[1024];
    const char *job = NULL;
    int once = 0;
    int interval_ms = 1000;
    default_dir(dir, sizeof dir);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--dir") && i + 1 < argc) {
            snprintf(dir, sizeof dir, "%s", argv[++i]);
            dir_given = 1;
        }
        else if (!strcmp(argv[i], "--job") && i + 1 < argc)
            job = argv[++i];
        else if (!strcmp(argv[i], "--once"))
            once = 1;
        else if (!strcmp(argv[i], "--interval") && i + 1 < argc) {
            if (cli_int("plexus-top", "--interval", argv[++i], 1, 3600000, &interval_ms))
                return 2;
        }
        else if (!strcmp(argv[i], "--all"))
            show_all = 1;
        else {
            fprintf(stderr, "usage: plexus-top [--dir DIR] [--job TEXT] [--once] [--interval MS] [--all]\n");
            return 2;
        }
    }
    if (once)
        return snapshot(dir, job);
    for (;;) {
        printf("\033[H\033[J");
        snapshot(dir, job);
        fflush(stdout);
        struct timespec ts = {interval_ms / 1000, (long)(interval_ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
    }
}
