#!/usr/bin/env python3
"""bench/measure.py - run one command and print its wall time and peak RSS.

    bench/measure.py [--out FILE] [--env K=V ...] -- CMD ARGS...

Prints `wall_s=... cpu_s=... peak_rss_mb=... rc=...` on one line: wall time,
user plus system CPU time, and the largest resident set of the command and
its children (getrusage). CPU time leaves out waiting: for a command that
writes gigabytes, the kernel's write-back throttling shows in wall time only. The
command's stdout goes to FILE (default /dev/null); its stderr passes through.
Used by bench/scale.sh so the benchmark needs no /usr/bin/time.
"""
import os
import resource
import subprocess
import sys
import time


def main():
    args = sys.argv[1:]
    out, env = os.devnull, dict(os.environ)
    while args and args[0] != "--":
        if args[0] == "--out":
            out, args = args[1], args[2:]
        elif args[0] == "--env":
            k, _, v = args[1].partition("=")
            env[k] = v
            args = args[2:]
        else:
            sys.exit("measure.py: unknown option %s (usage: measure.py [--out FILE] [--env K=V] -- CMD...)" % args[0])
    if not args[1:]:
        sys.exit("measure.py: no command (usage: measure.py [--out FILE] [--env K=V] -- CMD...)")
    with open(out, "w") as f:
        t0 = time.monotonic()
        rc = subprocess.call(args[1:], stdout=f, env=env)
        wall = time.monotonic() - t0
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    print("wall_s=%.3f cpu_s=%.3f peak_rss_mb=%.1f rc=%d" % (wall, ru.ru_utime + ru.ru_stime, ru.ru_maxrss / 1024.0, rc))
    sys.exit(0)


if __name__ == "__main__":
    main()
