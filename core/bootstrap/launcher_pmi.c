/* launcher_pmi.c - the rendezvous of a job whose process manager speaks
 * PMI-1's wire protocol on an inherited socket (PMI_FD): MPICH's Hydra
 * (mpirun.mpich) and Slurm's pmi2 plugin. Rank 0 hosts the store and puts
 * its address in the job's key-value space; after a barrier of the whole
 * job every rank reads it. The protocol is lines of "cmd=NAME key=value",
 * one answer per request, so no library is needed. */
#include <dlfcn.h>
#include <link.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "bootstrap.h"
#include "error.h"

/* The keys rank 0 puts in the job's key-value space: the store's address
 * and the job secret ("" when the user set one: Hydra forwards no empty
 * value, so "none"), which only the job's processes can read. */
#define STORE_KEY "plexus.store"
#define SECRET_KEY "plexus.secret"

static int64_t now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* One connection's state: the fd, the deadline of the exchange under way
 * (< 0: none) and, for errors, the step it is in. */
struct pmi_conn {
    int fd, rank;
    int64_t deadline;
    const char *step;
};

static int send_line(struct pmi_conn *c, const char *line)
{
    size_t len = strlen(line), off = 0;
    while (off < len) {
        /* MSG_NOSIGNAL: a manager that closed the socket is an error, not a SIGPIPE. */
        ssize_t w = send(c->fd, line + off, len - off, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return plx__err(PLX_ERR_SYSTEM, "PMI bootstrap (rank %d, PMI_FD=%d): the %s cannot be sent: %s", c->rank,
                            c->fd, c->step, w < 0 ? strerror(errno) : "nothing written");
        off += (size_t)w;
    }
    return 0;
}

/* One answer line, byte by byte: nothing past its newline is taken from
 * the socket, which an MPI library of this process may read after us. */
static int recv_line(struct pmi_conn *c, char *buf, size_t n)
{
    size_t o = 0;
    for (;;) {
        int64_t left = c->deadline < 0 ? -1 : c->deadline - now_ms();
        if (c->deadline >= 0 && left <= 0)
            return plx__err(PLX_ERR_TIMEOUT, "PMI bootstrap (rank %d, PMI_FD=%d): no answer to the %s in time: "
                            "a rank of the job did not reach plx_comm_init, or the process manager stalled",
                            c->rank, c->fd, c->step);
        struct pollfd p = {.fd = c->fd, .events = POLLIN};
        int r = poll(&p, 1, left < 0 || left > 1000 ? 1000 : (int)left);
        if (r < 0 && errno != EINTR)
            return plx__err(PLX_ERR_SYSTEM, "PMI bootstrap (rank %d): poll on PMI_FD=%d: %s", c->rank, c->fd,
                            strerror(errno));
        if (r <= 0)
            continue;
        char ch;
        ssize_t got = read(c->fd, &ch, 1);
        if (got < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (got <= 0)
            return plx__err(PLX_ERR_SYSTEM, "PMI bootstrap (rank %d, PMI_FD=%d): the process manager closed the "
                            "connection during the %s", c->rank, c->fd, c->step);
        if (ch == '\n') {
            buf[o] = '\0';
            return 0;
        }
        if (o + 1 < n)
            buf[o++] = ch;
    }
}

/* The value of " key=" in an answer line into out; the last field
 * (value=) runs to the end of the line. 0, or -1 if absent. */
static int field(const char *line, const char *key, char *out, size_t n)
{
    size_t kl = strlen(key);
    for (const char *p = line; (p = strstr(p, key)) != NULL; p += kl) {
        if ((p != line && p[-1] != ' ') || p[kl] != '=')
            continue;
        const char *v = p + kl + 1;
        size_t len = strcmp(key, "value") ? strcspn(v, " ") : strlen(v);
        snprintf(out, n, "%.*s", (int)len, v);
        return 0;
    }
    return -1;
}

/* Sends one request and checks its answer: command `want`, and rc=0 where
 * the answer carries an rc. */
static int request(struct pmi_conn *c, const char *step, const char *line, const char *want, char *ans, size_t n)
{
    char cmd[64], rc[16];
    c->step = step;
    int err = send_line(c, line);
    if (err == 0)
        err = recv_line(c, ans, n);
    if (err != 0)
        return err;
    int bad_rc = !field(ans, "rc", rc, sizeof rc) && strcmp(rc, "0");
    if (field(ans, "cmd", cmd, sizeof cmd) || strcmp(cmd, want) || bad_rc)
        return plx__err(PLX_ERR_SYSTEM, "PMI bootstrap (rank %d, PMI_FD=%d): the %s failed: the process manager "
                        "answered '%.200s'", c->rank, c->fd, step, ans);
    return 0;
}

/* An MPI library of this process (MPICH, directly or behind the standard
 * ABI, under any file name) that was initialised: it speaks PMI on the
 * same socket, and its MPI_Finalize ends the session and closes it. */
static int mpi_seen(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    int *seen = data;
    if (*seen || !info->dlpi_name || !strstr(info->dlpi_name, "libmpi"))
        return 0;
    void *h = dlopen(info->dlpi_name, RTLD_NOW | RTLD_NOLOAD);
    if (!h)
        return 0;
    int (*initialized)(int *) = (int (*)(int *))dlsym(h, "MPI_Initialized");
    int (*finalized)(int *) = (int (*)(int *))dlsym(h, "MPI_Finalized");
    int in = 0, fin = 0;
    if (initialized && finalized && initialized(&in) == 0 && finalized(&fin) == 0)
        *seen = in || fin;
    dlclose(h);
    return 0;
}

static int mpi_owns_session(void)
{
    int seen = 0;
    dl_iterate_phdr(mpi_seen, &seen);
    return seen;
}

/* The PMI session stays open until the process ends: Hydra counts a
 * process that closes its PMI socket without finalize as failed and kills
 * the job; an MPI library initialised after us shares the session. */
static struct pmi_conn session = {.fd = -1};
static pid_t init_pid;
static int stuck;
static struct stat session_stat; /* the socket: its number may be reused once an MPI closed it */

static void finalize_now(void)
{
    char ans[256];
    struct stat now;
    if (getpid() != init_pid || stuck || mpi_owns_session()) /* a forked child's exit is not ours to report */
        return;
    if (fstat(session.fd, &now) != 0 || now.st_dev != session_stat.st_dev || now.st_ino != session_stat.st_ino)
        return;
    session.deadline = now_ms() + 10000;
    plx__err_clear();
    if (request(&session, "finalize", "cmd=finalize\n", "finalize_ack", ans, sizeof ans) != 0)
        plx__err_clear();
}

static int exchange(const struct plx_config *v, const struct plx__rendezvous *rv, int fd, int64_t timeout_ms,
                    char *url, size_t n)
{
    char ans[1200], kvs[256], line[1400];
    struct pmi_conn *c = &session;
    if (stuck)
        return plx__err(PLX_ERR_TIMEOUT, "PMI bootstrap (rank %d, PMI_FD=%d): an earlier exchange timed out and the "
                        "process manager may still answer it", rv->rank, fd);
    c->fd = fd;
    c->rank = rv->rank;
    c->deadline = timeout_ms < 0 ? -1 : now_ms() + timeout_ms;
    int rc = request(c, "init", "cmd=init pmi_version=1 pmi_subversion=1\n", "response_to_init", ans, sizeof ans);
    if (rc == 0 && !init_pid && fstat(fd, &session_stat) == 0) {
        init_pid = getpid();
        atexit(finalize_now);
    }
    if (rc == 0)
        rc = request(c, "read of the job's key-value space name", "cmd=get_my_kvsname\n", "my_kvsname", ans,
                     sizeof ans);
    if (rc == 0 && field(ans, "kvsname", kvs, sizeof kvs))
        rc = plx__err(PLX_ERR_SYSTEM, "PMI bootstrap (rank %d): the process manager named no key-value space: '%.200s'",
                      rv->rank, ans);
    char secret[80] = "";
    if (rc == 0 && rv->rank == 0 && (rc = plx__launcher_secret_make(secret, sizeof secret)) == 0 &&
        (rc = plx__launcher_host_store(v, "PMI", url, n)) == 0) {
        snprintf(line, sizeof line, "cmd=put kvsname=%s key=" STORE_KEY " value=%s\n", kvs, url);
        rc = request(c, "publication of the store address", line, "put_result", ans, sizeof ans);
        snprintf(line, sizeof line, "cmd=put kvsname=%s key=" SECRET_KEY " value=%s\n", kvs,
                 secret[0] ? secret : "none");
        if (rc == 0)
            rc = request(c, "publication of the job secret", line, "put_result", ans, sizeof ans);
    }
    if (rc == 0)
        rc = request(c, "barrier of the whole job", "cmd=barrier_in\n", "barrier_out", ans, sizeof ans);
    if (rc == 0 && rv->rank != 0) {
        snprintf(line, sizeof line, "cmd=get kvsname=%s key=" STORE_KEY "\n", kvs);
        rc = request(c, "read of rank 0's store address", line, "get_result", ans, sizeof ans);
        if (rc == 0 && (field(ans, "value", url, n) || strncmp(url, "tcp://", 6)))
            rc = plx__err(PLX_ERR_SYSTEM, "PMI bootstrap (rank %d, key-value space %s): rank 0's store address is "
                          "not a tcp:// url: '%.200s'", rv->rank, kvs, ans);
        snprintf(line, sizeof line, "cmd=get kvsname=%s key=" SECRET_KEY "\n", kvs);
        if (rc == 0)
            rc = request(c, "read of rank 0's job secret", line, "get_result", ans, sizeof ans);
        if (rc == 0 && (field(ans, "value", secret, sizeof secret) == 0 && strcmp(secret, "none")))
            rc = plx__launcher_secret_adopt(secret);
    }
    if (rc == PLX_ERR_TIMEOUT)
        stuck = 1; /* an answer may still come: no request after it */
    return rc;
}

static pthread_mutex_t cache_mu = PTHREAD_MUTEX_INITIALIZER;
static char cached_url[512];

int plx__pmi_store_url(const struct plx_config *v, const struct plx__rendezvous *rv, int64_t timeout_ms, char *url,
                       size_t n)
{
    long fd;
    if (plx__env_uint("PMI_FD", 1 << 20, &fd))
        return plx__err(PLX_ERR_INVALID_ARG, "PMI bootstrap: PMI_FD='%s' is not a file descriptor",
                        getenv("PMI_FD") ? getenv("PMI_FD") : "");
    /* One exchange per process, as with PMIx: a later communicator may be
     * made by fewer ranks than a barrier of the job needs. */
    pthread_mutex_lock(&cache_mu);
    int rc = 0;
    if (!cached_url[0])
        rc = exchange(v, rv, (int)fd, timeout_ms, cached_url, sizeof cached_url);
    if (rc == 0)
        snprintf(url, n, "%s", cached_url);
    else
        cached_url[0] = '\0';
    pthread_mutex_unlock(&cache_mu);
    return rc;
}

int plx__rendezvous_pmi(struct plx__rendezvous *r)
{
    long fd, rank;
    if (plx__env_uint("PMI_FD", 1 << 20, &fd)) {
        snprintf(r->why, sizeof r->why, "no PMI process manager started us (PMI_FD unset)");
        return 0;
    }
    /* A launcher inside another's job may pass the outer job's variables on. */
    if (plx__env_uint("PMI_RANK", 999999999, &rank) || rank != r->rank) {
        snprintf(r->why, sizeof r->why, "PMI's PMI_RANK='%.16s' is not this rank %d (%s started it)",
                 getenv("PMI_RANK") ? getenv("PMI_RANK") : "", r->rank, r->source);
        return 0;
    }
    snprintf(r->url, sizeof r->url, "pmi://%ld", fd);
    snprintf(r->why, sizeof r->why, "a PMI process manager started us (PMI_FD=%ld: Hydra or srun --mpi=pmi2): rank "
             "0 hosts the store and publishes its address in the job's PMI key-value space", fd);
    return 1;
}
