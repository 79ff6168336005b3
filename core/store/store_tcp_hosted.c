/* store_tcp_hosted.c - the tcp:// store servers this process hosts, kept
 * after the communicator that started one is destroyed. Ranks leave a
 * communicator in any order and then start the next one on the same
 * address: a rank that left first may already be waiting on this server
 * for the next rendezvous, so closing it with our communicator would pull
 * the store from under that rank. The next communicator hosted here on
 * the same address serves from the same server (keys of successive
 * communicators differ by generation, comm.c); the server ends with the
 * process. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "error.h"
#include "store_tcp.h"

struct hosted {
    struct hosted *next;
    char *host;
    int port;
    pid_t pid;    /* a forked child does not inherit the serving thread */
    char *secret; /* the server's, to tell a changed configuration */
    int users;
    struct plx__store_server *server;
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct hosted *list;

static int same_secret(const char *a, const char *b)
{
    return (!a && !b) || (a && b && !strcmp(a, b));
}

static void drop_secret(struct hosted *h)
{
    if (h->secret) {
        explicit_bzero(h->secret, strlen(h->secret));
        free(h->secret);
        h->secret = NULL;
    }
}

int plx__store_hosted_acquire(const char *host, int port, const struct plx__store_limits *lim,
                              struct plx__store_server **out)
{
    int rc = 0;
    pthread_mutex_lock(&mu);
    struct hosted *h = list;
    while (h && (h->port != port || strcmp(h->host, host) || h->pid != getpid()))
        h = h->next;
    if (h && h->users == 0 && !same_secret(h->secret, lim->secret)) {
        /* No communicator uses it and the job secret changed: serve anew. */
        plx__store_server_stop(h->server);
        h->server = NULL;
        drop_secret(h);
    }
    if (!h) {
        if (!(h = calloc(1, sizeof *h)) || !(h->host = strdup(host))) {
            free(h);
            pthread_mutex_unlock(&mu);
            return plx__err(PLX_ERR_NOMEM, "store: out of memory");
        }
        h->port = port;
        h->pid = getpid();
        h->next = list;
        list = h;
    }
    if (!h->server) {
        rc = plx__store_server_start_with(host, port, lim, &h->server, NULL);
        if (rc == 0 && lim->secret && !(h->secret = strdup(lim->secret))) {
            plx__store_server_stop(h->server);
            h->server = NULL;
            rc = plx__err(PLX_ERR_NOMEM, "store: out of memory");
        }
    }
    if (rc == 0) {
        h->users++;
        *out = h->server;
    }
    pthread_mutex_unlock(&mu);
    return rc;
}

int plx__store_hosted_acquire_any(const char *host, const struct plx__store_limits *lim,
                                  struct plx__store_server **out, int *port)
{
    struct hosted *h = calloc(1, sizeof *h);
    if (!h || !(h->host = strdup(host)) || (lim->secret && !(h->secret = strdup(lim->secret)))) {
        if (h)
            free(h->host);
        free(h);
        return plx__err(PLX_ERR_NOMEM, "store: out of memory");
    }
    int rc = plx__store_server_start_with(host, 0, lim, &h->server, &h->port);
    if (rc != 0) {
        drop_secret(h);
        free(h->host);
        free(h);
        return rc;
    }
    h->pid = getpid();
    h->users = 1;
    pthread_mutex_lock(&mu);
    h->next = list;
    list = h;
    pthread_mutex_unlock(&mu);
    *out = h->server;
    *port = h->port;
    return 0;
}

void plx__store_hosted_release(struct plx__store_server *s)
{
    pthread_mutex_lock(&mu);
    for (struct hosted *h = list; h; h = h->next)
        if (h->server == s && h->pid == getpid() && h->users > 0)
            h->users--;
    pthread_mutex_unlock(&mu);
}
