#!/bin/sh
# scripts/python.sh - print a python3 that can import numpy (the float64
# reference needs it). A pyenv or venv python3 first on PATH often lacks
# Debian's python3-numpy, so fall back to /usr/bin/python3.
for py in python3 /usr/bin/python3; do
    if command -v "$py" >/dev/null 2>&1 && "$py" -c 'import numpy' >/dev/null 2>&1; then
        command -v "$py"
        exit 0
    fi
done
echo "python: no python3 with numpy; run scripts/deps.sh (installs python3-numpy)" >&2
exit 1
