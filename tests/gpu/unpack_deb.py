#!/usr/bin/env python3
"""unpack_deb.py DEB... DIR - extract Debian packages' files into DIR, like `dpkg-deb -x`, for a machine
without dpkg (tests/gpu/env.sh uses it only when dpkg-deb is missing). A .deb is an ar archive whose
member data.tar.{xz,gz,zst,} holds the files; xz and gz are read with the standard library (Debian's
packages use xz), zst needs the zstd command. Symbolic links are kept; nothing outside DIR is written."""
import io
import os
import shutil
import subprocess
import sys
import tarfile


def members(path):
    with open(path, "rb") as f:
        if f.read(8) != b"!<arch>\n":
            sys.exit(f"unpack_deb: {path}: not an ar archive (a .deb); download it again with apt-get download")
        while True:
            head = f.read(60)
            if len(head) < 60:
                return
            name = head[:16].decode().strip().rstrip("/")
            size = int(head[48:58].decode().strip())
            data = f.read(size)
            if size % 2:
                f.read(1)
            yield name, data


def data_tar(path):
    for name, data in members(path):
        if not name.startswith("data.tar"):
            continue
        if name.endswith(".zst"):
            if not shutil.which("zstd"):
                sys.exit(f"unpack_deb: {path}: data is zstd-compressed and zstd is not installed")
            data = subprocess.run(["zstd", "-dc"], input=data, stdout=subprocess.PIPE, check=True).stdout
            return tarfile.open(fileobj=io.BytesIO(data), mode="r:")
        return tarfile.open(fileobj=io.BytesIO(data), mode="r:*")
    sys.exit(f"unpack_deb: {path}: no data.tar member")


def main():
    if len(sys.argv) < 3:
        sys.exit("usage: unpack_deb.py DEB... DIR")
    dest = os.path.abspath(sys.argv[-1])
    os.makedirs(dest, exist_ok=True)
    for deb in sys.argv[1:-1]:
        with data_tar(deb) as t:
            for m in t.getmembers():
                target = os.path.abspath(os.path.join(dest, m.name))
                if target != dest and not target.startswith(dest + os.sep):
                    sys.exit(f"unpack_deb: {deb}: member {m.name} points outside {dest}")
            t.extractall(dest, filter="tar") if hasattr(tarfile, "data_filter") else t.extractall(dest)
    return 0


if __name__ == "__main__":
    sys.exit(main())
