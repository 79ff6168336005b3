/* store_host - our TCPStore server on its own, for foreign clients: listens
 * on HOST (default 127.0.0.1) and a free port, prints the port on one line,
 * and serves until its standard input closes (or 300 s pass), the way a
 * launcher would host the store for unmodified torch ranks.
 * Usage: store_host [HOST] */
#include <poll.h>
#include <stdio.h>
#include <unistd.h>

#include "plexus/plexus.h"
#include "store_tcp.h"

int main(int argc, char **argv)
{
    const char *host = argc > 1 ? argv[1] : "127.0.0.1";
    struct plx__store_server *s = NULL;
    int port = 0;
    if (plx__store_server_start(host, 0, &s, &port) != 0) {
        fprintf(stderr, "store_host: %s\n", plx_last_error());
        return 1;
    }
    printf("%d\n", port);
    fflush(stdout);
    /* Until the parent closes our stdin (or dies): never outlive the test. */
    struct pollfd pf = {0, POLLIN, 0};
    char buf[64];
    for (int waited = 0; waited < 300000; waited += 1000) {
        if (poll(&pf, 1, 1000) > 0 && read(0, buf, sizeof buf) <= 0)
            break;
    }
    plx__store_server_stop(s);
    return 0;
}
