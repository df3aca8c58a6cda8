#!/bin/sh
# tests/gpu/srchash.sh - one hash of the sources bin/tessgen is built from (gen/, templates/, tools/embed.c),
# so tests/gpu/env.sh can tell a carried tessgen built from other sources than the tree it runs in.
cd "$(dirname "$0")/../.." || exit 1
cat gen/*.c gen/*.h templates/* tools/embed.c | sha256sum | cut -c1-16
