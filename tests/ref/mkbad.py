"""mkbad.py - writes deliberately broken weights and input files for the
runtime's error-path tests (tests/files.sh). Standard library and numpy only.

  mkbad.py truncate IN OUT N        drop the last N bytes
  mkbad.py drop IN OUT NAME         remove tensor NAME from a safetensors file (its __metadata__ kept)
  mkbad.py meta IN OUT KEY VALUE    set __metadata__ KEY to the string VALUE (tensors kept byte for byte)
  mkbad.py flip IN OUT N            flip the lowest bit of the byte N bytes before the end (in the data)
  mkbad.py f64 IN OUT NAME          store tensor NAME as F64 (valid file, wrong dtype)
  mkbad.py f16 IN OUT NAME          store tensor NAME as F16 (valid file, a dtype --weights refuses)
  mkbad.py bf16-span IN OUT NAME    header says NAME is BF16 but its data_offsets keep the F32 span
                                    (4 bytes per element, twice what BF16 needs)
  mkbad.py lie IN OUT NAME          header claims a shape that does not match NAME's byte range
  mkbad.py badjson IN OUT           header is not JSON
  mkbad.py npy-f64 IN OUT           the .npy as float64
  mkbad.py npy-fortran IN OUT       the .npy in Fortran order
  mkbad.py nan IN OUT NAME V I...   set element [I...] of tensor NAME to V (nan, inf, -inf)
  mkbad.py npy-nan IN OUT V I...    set element [I...] of the .npy to V
  mkbad.py rename IN OUT OLD NEW    store tensor OLD under the name NEW (e.g. mix name conventions)
  mkbad.py dup IN OUT NAME NEW      add a copy of tensor NAME under the name NEW as well
"""
import json
import struct
import sys

import numpy as np


def read_st(path):
    raw = open(path, "rb").read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    return header, raw[8 + n:]


def write_st(path, tensors, meta=None):
    """tensors: list of (name, dtype_str, shape, bytes)"""
    header, off, blobs = {}, 0, []
    if meta is not None:
        header["__metadata__"] = meta
    for name, dt, shape, blob in tensors:
        header[name] = {"dtype": dt, "shape": list(shape), "data_offsets": [off, off + len(blob)]}
        off += len(blob)
        blobs.append(blob)
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def tensors_of(path):
    header, data = read_st(path)
    out = []
    for name, t in header.items():
        if name == "__metadata__":
            continue
        b, e = t["data_offsets"]
        out.append((name, t["dtype"], t["shape"], data[b:e]))
    return out


def main(argv):
    cmd, src, dst = argv[1], argv[2], argv[3]
    if cmd == "truncate":
        raw = open(src, "rb").read()
        open(dst, "wb").write(raw[: len(raw) - int(argv[4])])
    elif cmd == "drop":
        if not any(t[0] == argv[4] for t in tensors_of(src)):
            sys.exit("mkbad.py: no tensor " + argv[4])
        write_st(dst, [t for t in tensors_of(src) if t[0] != argv[4]], read_st(src)[0].get("__metadata__"))
    elif cmd == "meta":
        meta = dict(read_st(src)[0].get("__metadata__") or {})
        meta[argv[4]] = argv[5]
        write_st(dst, tensors_of(src), meta)
    elif cmd == "flip":
        raw = bytearray(open(src, "rb").read())
        raw[len(raw) - int(argv[4])] ^= 1
        open(dst, "wb").write(bytes(raw))
    elif cmd == "f64":
        ts = []
        for name, dt, shape, blob in tensors_of(src):
            if name == argv[4]:
                blob = np.frombuffer(blob, "<f4").astype("<f8").tobytes()
                dt = "F64"
            ts.append((name, dt, shape, blob))
        write_st(dst, ts)
    elif cmd == "f16":
        ts = []
        for name, dt, shape, blob in tensors_of(src):
            if name == argv[4]:
                blob = np.frombuffer(blob, "<f4").astype("<f2").tobytes()
                dt = "F16"
            ts.append((name, dt, shape, blob))
        write_st(dst, ts)
    elif cmd == "bf16-span":
        ts = [(n, "BF16" if n == argv[4] else dt, shape, blob) for n, dt, shape, blob in tensors_of(src)]
        if not any(n == argv[4] for n, *_ in ts):
            sys.exit("mkbad.py: no tensor " + argv[4])
        write_st(dst, ts)
    elif cmd == "lie":
        header, data = read_st(src)
        header[argv[4]]["shape"] = [s * 2 for s in header[argv[4]]["shape"]]
        h = json.dumps(header).encode()
        h += b" " * ((8 - len(h) % 8) % 8)
        open(dst, "wb").write(struct.pack("<Q", len(h)) + h + data)
    elif cmd == "badjson":
        raw = open(src, "rb").read()
        (n,) = struct.unpack("<Q", raw[:8])
        open(dst, "wb").write(raw[:8] + b"{not json" + b" " * (n - 9) + raw[8 + n:])
    elif cmd == "nan":
        ts = []
        for name, dt, shape, blob in tensors_of(src):
            if name == argv[4]:
                a = np.frombuffer(blob, "<f4").reshape(shape).copy()
                a[tuple(int(i) for i in argv[6:])] = float(argv[5])
                blob = a.tobytes()
            ts.append((name, dt, shape, blob))
        write_st(dst, ts)
    elif cmd == "npy-nan":
        a = np.load(src)
        a[tuple(int(i) for i in argv[5:])] = float(argv[4])
        np.save(dst, a)
    elif cmd in ("rename", "dup"):
        ts = tensors_of(src)
        if not any(t[0] == argv[4] for t in ts):
            sys.exit("mkbad.py: no tensor " + argv[4])
        if cmd == "rename":
            ts = [(argv[5] if n == argv[4] else n, dt, shape, blob) for n, dt, shape, blob in ts]
        else:
            ts += [(argv[5], dt, shape, blob) for n, dt, shape, blob in ts if n == argv[4]]
        write_st(dst, ts)
    elif cmd == "npy-f64":
        np.save(dst, np.load(src).astype(np.float64))
    elif cmd == "npy-fortran":
        np.save(dst, np.asfortranarray(np.load(src)))
    else:
        sys.exit("mkbad.py: unknown command " + cmd)


if __name__ == "__main__":
    main(sys.argv)
