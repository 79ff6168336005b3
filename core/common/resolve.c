/* resolve.c - getaddrinfo within a time limit (resolve.h). The lookup runs on
 * a detached thread; the caller and the thread share one record, freed by
 * whichever lets go of it last, so a caller that gave up returns at once and
 * the thread's late answer is dropped. */
#include "resolve.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct lookup {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int refs, done, rc, err;
    struct addrinfo hints, *res;
    char *host, *port;
};

static void unref(struct lookup *l)
{
    /* Called with l->mu held; frees l when this was the last holder. */
    int last = --l->refs == 0;
    pthread_mutex_unlock(&l->mu);
    if (!last)
        return;
    if (l->res)
        freeaddrinfo(l->res);
    pthread_mutex_destroy(&l->mu);
    pthread_cond_destroy(&l->cv);
    free(l->host);
    free(l->port);
    free(l);
}

static void *lookup_main(void *arg)
{
    struct lookup *l = arg;
    struct addrinfo *res = NULL;
    int rc = getaddrinfo(l->host, l->port, &l->hints, &res);
    int err = errno;
    pthread_mutex_lock(&l->mu);
    l->rc = rc;
    l->err = err;
    l->res = res;
    l->done = 1;
    pthread_cond_signal(&l->cv);
    unref(l);
    return NULL;
}

static struct lookup *lookup_new(const char *host, const char *port, const struct addrinfo *hints)
{
    struct lookup *l = calloc(1, sizeof *l);
    if (!l)
        return NULL;
    l->host = strdup(host);
    l->port = port ? strdup(port) : NULL;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    int ok = l->host && (!port || l->port) && pthread_cond_init(&l->cv, &ca) == 0;
    pthread_condattr_destroy(&ca);
    if (!ok) {
        free(l->host);
        free(l->port);
        free(l);
        return NULL;
    }
    pthread_mutex_init(&l->mu, NULL);
    if (hints)
        l->hints = *hints;
    l->hints.ai_next = NULL;
    l->refs = 2;
    return l;
}

int plx_common_resolve(const char *host, const char *port, const struct addrinfo *hints, int64_t timeout_ms,
                       struct addrinfo **res)
{
    *res = NULL;
    if (!host || timeout_ms < 0)
        return getaddrinfo(host, port, hints, res);
    struct addrinfo numeric = hints ? *hints : (struct addrinfo){0};
    numeric.ai_flags |= AI_NUMERICHOST;
    int rc = getaddrinfo(host, port, &numeric, res);
    if (rc != EAI_NONAME)
        return rc; /* an address (or a failure that no lookup would change) */
    struct lookup *l = lookup_new(host, port, hints);
    pthread_t t;
    pthread_attr_t a;
    if (!l || pthread_attr_init(&a) != 0) {
        free(l);
        return getaddrinfo(host, port, hints, res); /* no memory for the limit: unbounded, as before */
    }
    pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
    int started = pthread_create(&t, &a, lookup_main, l) == 0;
    pthread_attr_destroy(&a);
    if (!started) {
        pthread_mutex_lock(&l->mu);
        l->refs = 1;
        unref(l);
        return getaddrinfo(host, port, hints, res);
    }
    struct timespec end;
    clock_gettime(CLOCK_MONOTONIC, &end);
    end.tv_sec += timeout_ms / 1000;
    end.tv_nsec += (timeout_ms % 1000) * 1000000L;
    if (end.tv_nsec >= 1000000000L) {
        end.tv_sec++;
        end.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&l->mu);
    while (!l->done && pthread_cond_timedwait(&l->cv, &l->mu, &end) != ETIMEDOUT)
        ;
    if (l->done) {
        rc = l->rc;
        errno = l->err;
        *res = l->res;
        l->res = NULL;
    } else {
        rc = EAI_AGAIN;
        errno = ETIMEDOUT;
    }
    unref(l);
    return rc;
}
