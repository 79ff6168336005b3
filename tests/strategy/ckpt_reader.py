#!/usr/bin/python3
"""An independent reader of plexus checkpoints: numpy and the standard
library only, no plexus code. It follows the published layout (README:
"Checkpoints"): index.json names each tensor's dtype, global shape and the
pieces (file, key, element offset, count, BLAKE2b-256 per block) that hold
it; each file is safetensors (u64 little-endian header length, JSON header,
raw little-endian data). It rebuilds every tensor, verifies every checksum
and coverage, and compares the values with the ones ckpt_data.h defines.

    ckpt_reader.py CHECKPOINT_DIR        exit 0 if all matches, 1 if not,
                                         77 if numpy is missing
"""
import hashlib
import json
import os
import struct
import sys

try:
    import numpy as np
except ImportError:
    print("SKIP: python3-numpy is not installed")
    sys.exit(77)

DTYPES = {"F16": np.uint16, "BF16": np.uint16, "F32": np.float32, "F64": np.float64, "I8": np.int8,
          "U8": np.uint8, "I32": np.int32, "U32": np.uint32, "I64": np.int64, "U64": np.uint64}


def read_safetensors(path):
    with open(path, "rb") as f:
        blob = f.read()
    (hlen,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + hlen])
    return header, blob[8 + hlen:]


def rebuild(ckdir):
    index = json.load(open(os.path.join(ckdir, "index.json")))
    block = index["checksum"]["block_bytes"]
    assert index["checksum"]["algorithm"] == "blake2b-256"
    files, tensors = {}, {}
    for name, t in index["tensors"].items():
        dt = np.dtype(DTYPES[t["dtype"]]).newbyteorder("<")
        n = int(np.prod(t["shape"], dtype=np.int64))
        out = np.zeros(n, dtype=dt)
        seen = np.zeros(n, dtype=bool)
        for s in t["shards"]:
            if s["file"] not in files:
                files[s["file"]] = read_safetensors(os.path.join(ckdir, s["file"]))
            header, data = files[s["file"]]
            e = header[s["key"]]
            assert e["dtype"] == t["dtype"], (name, e["dtype"])
            assert e["shape"] == [s["count"]], (name, e["shape"])
            lo, hi = e["data_offsets"]
            raw = data[lo:hi]
            assert len(raw) == s["count"] * dt.itemsize, f"{s['file']}: {name} truncated"
            for b, want in enumerate(s["blake2b"]):
                got = hashlib.blake2b(raw[b * block:(b + 1) * block], digest_size=32).hexdigest()
                assert got == want, f"{s['file']}: {name}: block {b} checksum mismatch"
            assert len(s["blake2b"]) == (len(raw) + block - 1) // block
            out[s["offset"]:s["offset"] + s["count"]] = np.frombuffer(raw, dtype=dt)
            seen[s["offset"]:s["offset"] + s["count"]] = True
        assert seen.all(), f"{name}: elements {np.flatnonzero(~seen)[:5]} are in no shard"
        tensors[name] = out.reshape(t["shape"])
    return tensors


# The values ckpt_data.h defines (computed here from its integer formulas).
UNITS = ["layer1.weight", "layer1.bias", "layer2.weight", "layer2.bias"]
SHAPES = {"layer1.weight": [13, 7], "layer1.bias": [13], "layer2.weight": [5, 13], "layer2.bias": [1],
          "layer1.weight.momentum": [13, 7], "step": [1], "mask": [37], "scale.f16": [10]}


def value(k, i):
    return ((i * 37 + k * 101) % 1000) / 8.0 - 60.0


def expected(name, n):
    i = np.arange(n, dtype=np.int64)
    if name in UNITS:
        return value(UNITS.index(name), i)
    if name == "layer1.weight.momentum":
        return -value(0, i) / 4.0
    k = 4 + ["step", "mask", "scale.f16"].index(name)
    if name == "step":
        return 1000003 * k + i + 1
    if name == "mask":
        return (i * 7 + k) & 255
    return (i * 131 + k) & 0x3BFF


def main():
    ckdir = sys.argv[1]
    tensors = rebuild(ckdir)
    bad = 0
    if sorted(tensors) != sorted(SHAPES):
        print(f"FAIL: tensors {sorted(tensors)}, expected {sorted(SHAPES)}")
        return 1
    for name, t in tensors.items():
        if list(t.shape) != SHAPES[name]:
            print(f"FAIL: {name}: shape {list(t.shape)}, expected {SHAPES[name]}")
            bad += 1
            continue
        want = expected(name, t.size).astype(t.dtype)
        if not np.array_equal(t.reshape(-1), want):
            print(f"FAIL: {name}: values differ at {np.flatnonzero(t.reshape(-1) != want)[:5]}")
            bad += 1
        else:
            print(f"ok: {name} {t.dtype} {list(t.shape)}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
