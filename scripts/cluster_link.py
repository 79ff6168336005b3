#!/usr/bin/env python3
"""cluster_link.py - what a link of scripts/cluster.sh carries, over TCP.

  cluster_link.py ping ADDR [COUNT]         ICMP echo round trips (raw socket,
      root): prints ping_rtt_ms (median) and ping_min_ms
  cluster_link.py serve ADDR PORT           one client, then exit
  cluster_link.py client ADDR PORT BYTES    prints bulk_mbps (MB/s, 10^6
      bytes, from the first byte sent to the server's acknowledgement of the
      last) and pingpong_rtt_us (median round trip of a 1-byte message)
"""
import os
import select
import socket
import struct
import sys
import time

PINGS = 2000
CHUNK = 1 << 20


def recv_exact(s, n):
    got = bytearray()
    while len(got) < n:
        b = s.recv(min(n - len(got), CHUNK))
        if not b:
            raise SystemExit("cluster_link: the peer closed the connection early")
        got += b
    return bytes(got)


def checksum(b):
    if len(b) % 2:
        b += b"\0"
    s = sum(struct.unpack("!%dH" % (len(b) // 2), b))
    s = (s >> 16) + (s & 0xFFFF)
    s += s >> 16
    return ~s & 0xFFFF


def ping(addr, count):
    s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
    ident = os.getpid() & 0xFFFF
    rtts = []
    for seq in range(count):
        payload = b"plexus-cluster" + bytes(42)
        hdr = struct.pack("!BBHHH", 8, 0, 0, ident, seq)
        pkt = struct.pack("!BBHHH", 8, 0, checksum(hdr + payload), ident, seq) + payload
        t = time.perf_counter()
        s.sendto(pkt, (addr, 0))
        while True:
            left = 1.0 - (time.perf_counter() - t)
            if left <= 0 or not select.select([s], [], [], left)[0]:
                raise SystemExit("cluster_link: no echo reply from %s (seq %d)" % (addr, seq))
            data = s.recv(2048)
            ihl = (data[0] & 15) * 4
            typ, _, _, rid, rseq = struct.unpack("!BBHHH", data[ihl:ihl + 8])
            if typ == 0 and rid == ident and rseq == seq:
                rtts.append(time.perf_counter() - t)
                break
        time.sleep(0.05)
    rtts.sort()
    print("ping_rtt_ms=%.3f" % (rtts[len(rtts) // 2] * 1e3))
    print("ping_min_ms=%.3f" % (rtts[0] * 1e3))


def serve(addr, port):
    ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind((addr, port))
    ls.listen(1)
    ls.settimeout(60)
    s, _ = ls.accept()
    s.settimeout(120)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    (n,) = struct.unpack("!Q", recv_exact(s, 8))
    left = n
    while left:
        b = s.recv(min(left, CHUNK))
        if not b:
            raise SystemExit("cluster_link: bulk transfer cut short")
        left -= len(b)
    s.sendall(b"k")
    for _ in range(PINGS):
        s.sendall(recv_exact(s, 1))
    s.close()


def client(addr, port, n):
    s = None
    for _ in range(100):  # the server may not listen yet
        try:
            s = socket.create_connection((addr, port), timeout=120)
            break
        except OSError:
            time.sleep(0.05)
    if s is None:
        raise SystemExit("cluster_link: cannot connect to %s:%d" % (addr, port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    buf = bytes(CHUNK)
    t0 = time.perf_counter()
    s.sendall(struct.pack("!Q", n))
    left = n
    while left:
        k = min(left, CHUNK)
        s.sendall(buf[:k])
        left -= k
    recv_exact(s, 1)
    bulk = n / (time.perf_counter() - t0) / 1e6
    rtts = []
    for _ in range(PINGS):
        t = time.perf_counter()
        s.sendall(b"p")
        recv_exact(s, 1)
        rtts.append(time.perf_counter() - t)
    s.close()
    rtts.sort()
    print("bulk_bytes=%d" % n)
    print("bulk_mbps=%.1f" % bulk)
    print("pingpong_rtt_us=%.1f" % (rtts[len(rtts) // 2] * 1e6))


if __name__ == "__main__":
    if len(sys.argv) in (3, 4) and sys.argv[1] == "ping":
        ping(sys.argv[2], int(sys.argv[3]) if len(sys.argv) == 4 else 5)
    elif len(sys.argv) == 4 and sys.argv[1] == "serve":
        serve(sys.argv[2], int(sys.argv[3]))
    elif len(sys.argv) == 5 and sys.argv[1] == "client":
        client(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    else:
        sys.exit(__doc__)
