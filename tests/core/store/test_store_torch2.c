/* test_store_torch2.c - the store server and a client speaking torch 2.x's
 * TCPStore protocol, byte for byte as torch 2.6 and 2.14 send it: VALIDATE
 * with the magic number, PING (the nonce comes back), SET, WAIT then GET,
 * ADD, CHECK, GETNUMKEYS, DELETE_KEY, a WAIT given up with CANCEL_WAIT
 * (answered WAIT_CANCELED, and the connection goes on), and a query the
 * server does not serve (the client is dropped). A torch 1.13 client on
 * another connection, whose SET also starts with byte 0, is still served. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "plexus/plexus.h"
#include "check.h"
#include "store_tcp.h"

static int failures;

struct msg {
    unsigned char b[256];
    size_t n;
};

static void put(struct msg *m, const void *p, size_t n)
{
    memcpy(m->b + m->n, p, n);
    m->n += n;
}

static void put_u8(struct msg *m, uint8_t v)
{
    put(m, &v, 1);
}

static void put_i64(struct msg *m, int64_t v)
{
    put(m, &v, 8);
}

static void put_str(struct msg *m, const char *s)
{
    put_i64(m, (int64_t)strlen(s));
    put(m, s, strlen(s));
}

static int send_msg(int fd, struct msg *m)
{
    int ok = send(fd, m->b, m->n, MSG_NOSIGNAL) == (ssize_t)m->n;
    m->n = 0;
    return ok;
}

static int recv_all(int fd, void *p, size_t n)
{
    for (size_t got = 0; got < n;) {
        ssize_t k = recv(fd, (char *)p + got, n - got, 0);
        if (k <= 0)
            return 0;
        got += (size_t)k;
    }
    return 1;
}

static int dial(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    struct timeval tv = {5, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    CHECK(connect(fd, (struct sockaddr *)&a, sizeof a) == 0);
    return fd;
}

/* The torch 2.x session on fd. */
static void torch2(int fd)
{
    struct msg m = {0};
    uint32_t magic = PLX__TORCH2_MAGIC, nonce = 0x5eed1234, echo = 0;
    put_u8(&m, 0); /* VALIDATE */
    put(&m, &magic, 4);
    put_u8(&m, 13); /* PING */
    put(&m, &nonce, 4);
    CHECK(send_msg(fd, &m) && recv_all(fd, &echo, 4) && echo == nonce);
    put_u8(&m, 1); /* SET */
    put_str(&m, "k");
    put_str(&m, "v1");
    put_u8(&m, 6); /* WAIT, as torch's get() does first */
    put_i64(&m, 1);
    put_str(&m, "k");
    uint8_t r = 0xff;
    CHECK(send_msg(fd, &m) && recv_all(fd, &r, 1) && r == PLX__STOP_WAITING);
    put_u8(&m, 3); /* GET */
    put_str(&m, "k");
    int64_t len = 0;
    char v[8] = "";
    CHECK(send_msg(fd, &m) && recv_all(fd, &len, 8) && len == 2 && recv_all(fd, v, 2) && !memcmp(v, "v1", 2));
    put_u8(&m, 4); /* ADD */
    put_str(&m, "n");
    put_i64(&m, 5);
    int64_t x = 0;
    CHECK(send_msg(fd, &m) && recv_all(fd, &x, 8) && x == 5);
    put_u8(&m, 5); /* CHECK */
    put_i64(&m, 2);
    put_str(&m, "k");
    put_str(&m, "absent");
    CHECK(send_msg(fd, &m) && recv_all(fd, &r, 1) && r == PLX__NOT_READY);
    put_u8(&m, 6); /* a WAIT nobody answers, given up */
    put_i64(&m, 1);
    put_str(&m, "absent");
    CHECK(send_msg(fd, &m));
    usleep(100000);
    put_u8(&m, 12); /* CANCEL_WAIT */
    CHECK(send_msg(fd, &m) && recv_all(fd, &r, 1) && r == PLX__WAIT_CANCELED);
    put_u8(&m, 7); /* GETNUMKEYS: k, n, and t1 of the torch 1.13 client */
    CHECK(send_msg(fd, &m) && recv_all(fd, &x, 8) && x == 3);
    put_u8(&m, 8); /* DELETE_KEY */
    put_str(&m, "k");
    CHECK(send_msg(fd, &m) && recv_all(fd, &x, 8) && x == 1);
    put_u8(&m, 9); /* APPEND: not served */
    put_str(&m, "k");
    put_str(&m, "more");
    CHECK(send_msg(fd, &m) && !recv_all(fd, &r, 1));
}

int main(void)
{
    struct plx__store_server *srv = NULL;
    int port = 0;
    CHECK(plx__store_server_start("127.0.0.1", 0, &srv, &port) == 0);
    /* torch 1.13: SET (code 0, so its first byte is VALIDATE's), then GET. */
    int t1 = dial(port);
    struct msg m = {0};
    put_u8(&m, PLX__Q_SET);
    put_str(&m, "t1");
    put_str(&m, "x");
    put_u8(&m, PLX__Q_GET);
    put_str(&m, "t1");
    int64_t len = 0;
    char v = 0;
    CHECK(send_msg(t1, &m) && recv_all(t1, &len, 8) && len == 1 && recv_all(t1, &v, 1) && v == 'x');
    int t2 = dial(port);
    torch2(t2);
    close(t2);
    close(t1);
    plx__store_server_stop(srv);
    printf(failures ? "FAILED\n" : "ok\n");
    return failures ? 1 : 0;
}
