/* stop_at_listen.c - an LD_PRELOAD module for one_deadline.sh: the
 * process stops itself (SIGSTOP) at its STOP_AT_LISTEN-th listen() call,
 * before that socket listens. Rank 0's first listen is its store's, the
 * second its backend's (tcp's mesh, shm's segment socket): stopped there, it
 * has opened the store and will never join the backend's rendezvous. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* RTLD_NEXT */
#endif
#include <dlfcn.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>

int listen(int fd, int backlog)
{
    static int calls;
    int (*real)(int, int) = (int (*)(int, int))dlsym(RTLD_NEXT, "listen");
    const char *n = getenv("STOP_AT_LISTEN");
    if (n && ++calls == atoi(n))
        raise(SIGSTOP);
    return real ? real(fd, backlog) : -1;
}
