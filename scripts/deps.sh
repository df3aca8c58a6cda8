#!/bin/sh
# scripts/deps.sh - make sure the Debian packages tessgen needs are installed.
# Installs what is missing when run as root (as CI and fresh machines are);
# otherwise prints the one command to run and fails. Quiet when all is there.
#   scripts/deps.sh                what building and testing need
#   scripts/deps.sh --test-extras  optional test tools only (chromium, for the schedule.html test);
#                                  tests skip what needs them when they cannot be installed
#   scripts/deps.sh --fuzz         clang and its libFuzzer runtime, for ninja fuzz and the suite's
#                                  short fuzz runs (skipped when they cannot be installed)
#   scripts/deps.sh --slurm        Slurm's daemons and munge, for tests/slurm.sh, which starts a Slurm of
#                                  its own (run by the suite as root; skipped when they cannot be installed).
#                                  Not in the default list: on a machine with systemd the packages also
#                                  enable their services, which building and the demo do not need
set -u
pkgs="gcc libc6-dev liblua5.4-dev libopenmpi-dev openmpi-bin libopenblas-dev ninja-build python3-numpy"
if [ "${1:-}" = "--test-extras" ]; then
    pkgs="chromium"
elif [ "${1:-}" = "--fuzz" ]; then
    pkgs="clang libclang-rt-dev"
elif [ "${1:-}" = "--slurm" ]; then
    pkgs="slurmctld slurmd munge"
fi
missing=""
for p in $pkgs; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
echo "deps: missing Debian packages:$missing" >&2
if [ "$(id -u)" != 0 ]; then
    echo "deps: install them with: sudo apt-get install -y$missing" >&2
    exit 1
fi
# one install at a time: tests/run.sh starts the optional ones in the background while the first checks run, and a
# group that needs one of them waits here for it (then finds it installed) rather than failing on dpkg's lock
exec 9>/tmp/tessgen-deps.lock
flock 9
missing_now=""
for p in $missing; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing_now="$missing_now $p"
done
missing=$missing_now
[ -z "$missing" ] && exit 0
export DEBIAN_FRONTEND=noninteractive
if ! apt-get install -y -q $missing >/tmp/tessgen-apt.log 2>&1; then
    apt-get update -q >>/tmp/tessgen-apt.log 2>&1
    if ! apt-get install -y -q $missing >>/tmp/tessgen-apt.log 2>&1; then
        echo "deps: apt-get install failed; see /tmp/tessgen-apt.log" >&2
        tail -5 /tmp/tessgen-apt.log >&2
        exit 1
    fi
fi
echo "deps: installed$missing" >&2
