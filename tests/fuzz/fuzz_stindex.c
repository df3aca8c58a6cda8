/*
 * fuzz_stindex.c - libFuzzer harness for the sharded-checkpoint index
 * (runtime/tr_stset.c). The input is a whole model.safetensors.index.json,
 * placed in a scratch directory beside two fixed shards, s1.safetensors
 * (a [2,3], b [3]) and s2.safetensors (c [4,2]). An accepted index must keep
 * the promises the run relies on: names sorted and unique, each found by
 * tr_stset_has, each mapped to a shard that holds it (a zero-size block read
 * through the set succeeds), and the same table when opened without the
 * check (what the other ranks do). A refused index must leave the set closed
 * and the message must name the index.
 */
#include <stdint.h>
#include <string.h>

#include "fuzz_file.h"
#include "tr_stset.h"

static const char *setup(void)
{
    static char ix[600];
    if (ix[0])
        return ix;
    static float a[6] = {1, 2, 3, 4, 5, 6}, b[3] = {7, 8, 9}, c[8] = {0};
    tr_st_out s1[2] = {{"a", 2, {2, 3}, a}, {"b", 1, {3}, b}}, s2[1] = {{"c", 2, {4, 2}, c}};
    char p[600];
    tr_err e = {{0}};
    snprintf(p, sizeof p, "%s/s1.safetensors", fuzz_dir());
    FUZZ_ASSERT(tr_st_write_atomic(p, s1, 2, &e), "setup: %s", e.msg);
    snprintf(p, sizeof p, "%s/s2.safetensors", fuzz_dir());
    FUZZ_ASSERT(tr_st_write_atomic(p, s2, 1, &e), "setup: %s", e.msg);
    snprintf(ix, sizeof ix, "%s/model.safetensors.index.json", fuzz_dir());
    return ix;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *ix = setup();
    FILE *fp = fopen(ix, "wb");
    FUZZ_ASSERT(fp && fwrite(data, 1, size, fp) == size && fclose(fp) == 0, "cannot write %s", ix);
    tr_stset s;
    tr_err err = {{0}};
    if (!tr_stset_open(&s, ix, true, &err)) {
        FUZZ_ASSERT(s.ntensors == 0 && s.shards == NULL && s.entries == NULL, "a refused index left resources");
        FUZZ_ASSERT(strstr(err.msg, ix) != NULL, "message does not name the index: %s", err.msg);
        return 0;
    }
    FUZZ_ASSERT(s.sharded && s.ntensors > 0 && s.nshards > 0, "an accepted index with no tensors");
    for (int i = 0; i < s.ntensors; i++) {
        const char *n = tr_stset_name(&s, i);
        FUZZ_ASSERT(i == 0 || strcmp(tr_stset_name(&s, i - 1), n) < 0, "names not sorted and unique");
        FUZZ_ASSERT(tr_stset_has(&s, n), "tr_stset_has(%s)", n);
        FUZZ_ASSERT(s.entries[i].shard >= 0 && s.entries[i].shard < s.nshards, "shard index");
        float blk[1];
        tr_err e = {{0}};
        FUZZ_ASSERT(tr_stset_read_block(&s, n, 0, 0, 0, 0, blk, 1, &e), "read through the set: %s", e.msg);
    }
    tr_stset lazy;
    tr_err e = {{0}};
    FUZZ_ASSERT(tr_stset_open(&lazy, ix, false, &e), "accepted, then refused without the check: %s", e.msg);
    FUZZ_ASSERT(lazy.ntensors == s.ntensors && lazy.nshards == s.nshards, "the lazy table differs");
    for (int i = 0; i < s.ntensors; i++)
        FUZZ_ASSERT(!strcmp(tr_stset_name(&lazy, i), tr_stset_name(&s, i)) &&
                        lazy.entries[i].shard == s.entries[i].shard,
                    "the lazy table differs at %d", i);
    tr_stset_close(&lazy);
    tr_stset_close(&s);
    return 0;
}
