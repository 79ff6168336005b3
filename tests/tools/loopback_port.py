"""loopback_port.py - free loopback ports for a test's listeners, picked below
the kernel's ephemeral port range.

A port that bind(port 0) hands out comes from the ephemeral range, which every
outgoing connection and every other bind(port 0) on the host draw from too:
between the probe's close and the listener's own bind, another test (CI runs
its chroot stages beside the sanitizer stages) can take it, and the listener
fails with "Address already in use". The kernel never hands out ports below
that range, so there only another test's explicit pick can collide, and a
random pick among thousands makes that rare. The picks stay below 20000: the
ports plexus derives for a Slurm step's store (20000-31999) are left to the
Slurm tests."""
import random
import socket


def _ephemeral_floor():
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def _kernel_ports(n, host):
    """The kernel's picks: every socket stays bound until all n are chosen, so they differ."""
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind((host, 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def free_ports(n, host="127.0.0.1"):
    """n distinct ports that were free when probed."""
    top = min(_ephemeral_floor(), 20000) - 1
    bottom = 10000
    if top - bottom < 1000:  # a range that starts low: the kernel's pick is all there is
        return _kernel_ports(n, host)
    ports = []
    for _ in range(100 * n):  # a range nearly all in use ends in the kernel's picks, not a spin
        if len(ports) == n:
            return ports
        p = random.randint(bottom, top)
        if p in ports:
            continue
        with socket.socket() as s:
            try:
                s.bind((host, p))
            except OSError:
                continue  # held by a listener, a connection or a TIME_WAIT
        ports.append(p)
    return ports if len(ports) == n else ports + _kernel_ports(n - len(ports), host)


def free_port(host="127.0.0.1"):
    return free_ports(1, host)[0]
