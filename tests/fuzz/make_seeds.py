#!/usr/bin/env python3
"""Writes the hand-made seed inputs of every fuzz target into corpus/<target>/.

Seeds are small valid and near-valid inputs in each target's input format
(see the comment at the top of each fuzz_*.c). Regression inputs (crashes the
fuzzer found) are committed next to them as crash-<target>-<what> and are not
written by this script. Run it from anywhere: python3 tests/fuzz/make_seeds.py
"""
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))


def write(target, name, data):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, "seed-" + name), "wb") as f:
        f.write(data)


# ---- config: plexus.ini \0 drop-in \0 variables \0 option file \0 overrides --

def config():
    def parts(*p):
        return "\0".join(p)

    write("config", "core", "[core]\nbackend = tcp\ntimeout_ms = 5000\nlog_level = info\n")
    with open(os.path.join(HERE, "..", "..", "etc", "plexus.ini")) as f:
        write("config", "sample", f.read())
    write("config", "dropin", parts("[core]\nbackend = auto\n",
                                    "[tcp]\nlibrary = plexus-tcp.so\npriority = 70\nenabled = false\nifname = lo\n"))
    write("config", "env", parts("", "", "CORE_TIMEOUT_MS=100\nTCP_IFNAME=lo\nBACKEND=sim\nCORE_LOG_LEVEL=debug\n"))
    write("config", "options", parts("[core]\nsmall_bytes = 10\n", "", "",
                                     "[core]\nallreduce_algo = ring\n[sim]\nlibrary=/x.so\n",
                                     "core.small_bytes=1\ntcp.ifname=eth0\ncore.cuda_staging=yes\n"))
    write("config", "bad-line", "[core]\ntimeout_ms = 10\nthis line is bad\n")
    write("config", "bad-section", "[core\ntimeout_ms = 10\n")
    write("config", "no-section", "timeout_ms = 1\n")
    write("config", "typo", "# comment\n[core]\ntimeout = 10\n")
    write("config", "negative", "[core]\ntimeout_ms = -1\n")
    write("config", "bool", "[core]\ncuda_staging = maybe\n")
    write("config", "enum", "[core]\nlog_level = loud\n")
    write("config", "long-line", "[core]\nbackend = " + "x" * 300 + "\n")
    write("config", "crlf-bom", "\ufeff[core]\r\nbackend = sim\r\n; comment\r\n  timeout_ms = 7 ; inline\r\n")
    write("config", "multiline", "[core]\nbackend = tcp\n  continued\n[tcp]\nx=1\n")
    write("config", "bad-env", parts("", "", "CORE_TIMEOUT_MS=abc\n"))
    write("config", "bad-override", parts("", "", "", "", "core.=1\nnodot=1\n"))
    # A backend section whose variable prefix is longer than the buffer
    # apply_env formats it into.
    write("config", "long-section", parts("[" + "a" * 150 + "]\nkey = 1\n", "", "A" * 120 + "=v\n"))


# ---- store_decode: torch 1.13 TCPStore requests ---------------------------------

def s(b):
    if isinstance(b, str):
        b = b.encode()
    return struct.pack("<Q", len(b)) + b


def store():
    SET, CAS, GET, ADD, CHECK, WAIT, NUM, WATCH, DEL = range(9)
    reqs = {
        "set": bytes([SET]) + s("key") + s("value"),
        "cas": bytes([CAS]) + s("k") + s("old") + s("new"),
        "get": bytes([GET]) + s("rank_0"),
        "add": bytes([ADD]) + s("ctr") + struct.pack("<q", -3),
        "check": bytes([CHECK]) + struct.pack("<Q", 2) + s("a") + s("bb"),
        "wait": bytes([WAIT]) + struct.pack("<Q", 1) + s("ready"),
        "wait0": bytes([WAIT]) + struct.pack("<Q", 0),
        "num": bytes([NUM]),
        "watch": bytes([WATCH]) + s("w"),
        "del": bytes([DEL]) + s("key"),
    }
    for name, r in reqs.items():
        write("store_decode", name, r)
    write("store_decode", "stream", b"".join(reqs.values()))
    write("store_decode", "truncated", reqs["cas"][:-2])
    write("store_decode", "key-too-long", bytes([GET]) + struct.pack("<Q", (64 << 10) + 1) + b"x")
    write("store_decode", "value-too-long", bytes([SET]) + s("k") + struct.pack("<Q", (64 << 20) + 1))
    write("store_decode", "too-many-keys", bytes([CHECK]) + struct.pack("<Q", 4097))
    write("store_decode", "unknown-type", bytes([9]) + s("k"))
    write("store_decode", "huge-len", bytes([GET]) + struct.pack("<Q", 2 ** 64 - 1))


# ---- loader: the bytes fake_backend.c reads ------------------------------------

def loader():
    def desc(entry=0, minor=1, size=0x8028, nulls=0, name=0, strs=0, host=0, caps_rc=0,
             caps=(0x1ff, 0, 0xffff, 1), probe=0, state=None, reason=b"ok\0"):
        b = bytes([entry, minor]) + struct.pack("<HH", size, nulls) + bytes([name, strs, host, caps_rc])
        b += struct.pack("<4I", *caps) + bytes([probe])
        if state is not None:
            b += struct.pack("<i", state)
        # reason bytes double as the strings: name, version, log text, key
        return b + reason

    # 0x8028 -> sizeof(struct plx_backend) (152), 0x8018 -> ABI 1.0's 136.
    write("loader", "usable", desc())
    write("loader", "abi-1.0", desc(minor=0, size=0x8018))
    write("loader", "raw-size", desc(size=152))
    write("loader", "newer-plugin", desc(minor=1, size=400))
    write("loader", "too-small", desc(size=100))
    write("loader", "tiny", desc(size=2))
    write("loader", "entry-fails", desc(entry=7, host=0x41, reason=b"\x04fz\x00"))
    write("loader", "entry-null", desc(entry=6))
    write("loader", "minor-newer", desc(minor=3))
    write("loader", "no-probe", desc(nulls=1))
    write("loader", "no-req-free", desc(nulls=1 << 11))
    write("loader", "optional-null", desc(nulls=0x3fff & ~((1 << 0) | (1 << 1) | (1 << 3) | (1 << 4) | (1 << 9) | (1 << 11))))
    write("loader", "name-null", desc(name=1))
    write("loader", "name-case", desc(name=2))
    write("loader", "name-fuzzed", desc(name=3, reason=b"\x05other\x02v1"))
    write("loader", "strings-null", desc(strs=7))
    write("loader", "caps-fail", desc(caps_rc=3))
    write("loader", "probe-unavailable", desc(probe=1, reason=b"no device here\0"))
    write("loader", "probe-broken", desc(probe=2, reason=b"B" * 256))
    write("loader", "probe-rc", desc(probe=7))
    write("loader", "probe-state-odd", desc(probe=4, state=77))
    write("loader", "host-calls", desc(host=0x43, reason=b"\x00\x00\x05hello\x08priority"))


# ---- store_file: flags, delta, [key], the file's content --------------------------

def store_file():
    def inp(content=b"", kind=0, delta=1, key=None, wide=False):
        flags = kind | (4 if key is not None else 0) | (8 if wide else 0)
        b = bytes([flags]) + (struct.pack("<q", delta) if wide else struct.pack("<b", delta))
        if key is not None:
            b += bytes([len(key)]) + key.encode()
        return b + content

    write("store_file", "counter", inp(b"41"))
    write("store_file", "negative", inp(b"-5", delta=-3))
    write("store_file", "leading-zeros", inp(b"007"))
    write("store_file", "max", inp(b"9223372036854775807"))
    write("store_file", "min-overflow", inp(b"-1", delta=-2 ** 63, wide=True))
    write("store_file", "twenty-digits", inp(b"12345678901234567890"))
    write("store_file", "newline", inp(b"5\n"))
    write("store_file", "text", inp(b"abc"))
    write("store_file", "empty", inp(b""))
    write("store_file", "absent", inp(kind=1, delta=3))
    write("store_file", "folder", inp(kind=2))
    write("store_file", "too-big", inp(b"1", kind=3))
    write("store_file", "rank-key", inp(bytes(range(256)), key="rank_0"))
    write("store_file", "empty-key", inp(b"12", key=""))


# ---- tcp_wire: flags, then commands ----------------------------------------------

def frame(op, slot, length=0, nbytes=None, payload=None):
    if nbytes is None:
        nbytes = 48 + (length if op == 1 else 0)
    h = struct.pack("<6Q", nbytes, op, slot, 0, length, 0)
    if op == 1:
        h += payload if payload is not None else bytes(range(length % 256)) * (length // 256) + bytes(range(length % 256))
    return h


def wr(data):
    return bytes([0]) + struct.pack("<H", len(data)) + data


def recv(slot, size):
    return bytes([1, slot, size])


def recv_any(slot, size):
    return bytes([2, slot, size])


def send(slot, size):
    return bytes([3, slot, size])


REL = lambda i: bytes([4, i])
PROG, DRAIN, ABORT, EOF, INPUT_OFF, HANGUP = (bytes([c]) for c in (5, 6, 7, 8, 9, 10))
SR, RR, DATA, SB, LOST = 2, 3, 1, 0, 0x504C584C


def data(slot, n):
    return frame(DATA, slot, n, payload=bytes([0x41 + slot % 26]) * n)


def tcp():
    cases = {
        "recv": recv(1, 16) + wr(frame(SR, 1) + data(1, 16)) + DRAIN,
        "send": send(2, 8) + wr(frame(RR, 2)) + PROG + DRAIN,
        "send-first": wr(frame(RR, 2)) + send(2, 8) + PROG + DRAIN,
        "recv-any": recv_any(3, 32) + wr(frame(SR, 3) + data(3, 20)) + DRAIN,
        "zero-bytes": recv(4, 0) + send(4, 0) + wr(frame(SR, 4) + data(4, 0) + frame(RR, 4)) + PROG + DRAIN,
        "fifo": recv(5, 8) + recv(5, 8) + wr(frame(SR, 5) + frame(SR, 5) + data(5, 8) + data(5, 3)) + DRAIN,
        "big": recv(6, 0x80 | 8) + wr(frame(SR, 6) + data(6, 6000)) + DRAIN,
        "cancel-recv": recv(7, 16) + REL(0) + wr(frame(SR, 7) + data(7, 16)) + DRAIN,
        "cancel-send": send(8, 0x80 | 100) + wr(frame(RR, 8)) + REL(0) + PROG + DRAIN,
        "abort": recv(9, 16) + send(9, 4) + ABORT + wr(frame(SR, 9)) + DRAIN,
        "bad-opcode": recv(1, 16) + wr(frame(9, 1)),
        "bad-notify-len": wr(frame(SR, 1, nbytes=50)),
        "bad-data-len": recv(1, 16) + wr(frame(DATA, 1, 16, nbytes=60, payload=b"x" * 16)),
        "send-buffer": wr(frame(SB, 1)),
        "too-big": recv(1, 4) + wr(frame(SR, 1) + data(1, 64)),
        "cancel-too-big": recv(7, 4) + REL(0) + wr(frame(SR, 7) + data(7, 64)) + DRAIN,
        "unposted": wr(frame(SR, 1) + data(1, 8)),
        "garbage": wr(bytes(range(256)) * 2),
        "half-header": recv(1, 16) + wr(frame(SR, 1)[:20]),
        "half-payload": recv(1, 64) + wr(frame(SR, 1) + data(1, 64)[:80]),
        "big-split": recv(6, 0x80 | 8) + wr(frame(SR, 6) + data(6, 6000)[:48]) + PROG + wr(data(6, 6000)[48:]) + DRAIN,
        "eof-then-recv": wr(frame(SR, 1)) + EOF + PROG + recv(1, 8) + send(2, 8) + DRAIN,
        "hangup-send": recv(1, 8) + HANGUP + send(1, 8) + wr(frame(RR, 1)) + PROG,
        "corked": INPUT_OFF + recv(1, 8) + PROG + DRAIN + wr(frame(SR, 1) + data(1, 8)) + PROG + DRAIN,
    }
    eager = {
        "eager-early": wr(frame(SR, 1) + data(1, 12)) + recv(1, 12) + DRAIN,
        "eager-send": send(1, 8) + DRAIN + wr(frame(RR, 1)) + PROG + DRAIN,
        "eager-too-big": wr(frame(SR, 1) + data(1, 12)) + recv(1, 4),
        "eager-left": wr(frame(SR, 2) + data(2, 12)),
        "eager-lost-notice": recv(1, 8) + wr(frame(LOST, 0)) + DRAIN,
        "eager-lost-bad-rank": recv(1, 8) + wr(frame(LOST, 7)) + DRAIN,
    }
    for name, script in cases.items():
        write("tcp_wire", name, bytes([0]) + script)
        write("tcp_wire", name + "-thread", bytes([2]) + script)
    for name, script in eager.items():
        write("tcp_wire", name, bytes([1]) + script)
        write("tcp_wire", name + "-thread", bytes([3]) + script)
    # Teardown before the requests are released.
    write("tcp_wire", "teardown-first", bytes([4]) + recv(1, 16) + send(2, 8) + recv_any(3, 8))
    write("tcp_wire", "teardown-first-thread", bytes([6]) + recv(1, 16) + send(2, 8) + wr(frame(RR, 2)))


if __name__ == "__main__":
    config()
    store()
    loader()
    store_file()
    tcp()
