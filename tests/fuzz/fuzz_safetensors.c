/*
 * fuzz_safetensors.c - libFuzzer harness for the safetensors reader
 * (runtime/tr_safetensors.c). The input is a whole file. An accepted file
 * must keep every promise later calls rely on: tensors sorted with unique
 * names that tr_st_find finds, offsets inside the data section, each F32 or
 * BF16 tensor of at most 4 dimensions accepted by tr_st_expect_float with its own
 * shape and readable as a block (a corner of its 2-D view). A refused file
 * must leave nothing open and the message must name the file.
 */
#include <stdint.h>
#include <string.h>

#include "fuzz_file.h"
#include "tr_safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[64];
    int fd = fuzz_memfile(data, size, path, sizeof path);
    tr_st_file f;
    tr_err err = {{0}};
    if (!tr_st_open(&f, path, &err)) {
        FUZZ_ASSERT(f.map == NULL && f.tensors == NULL && f.fd == -1, "a failed open left resources");
        FUZZ_ASSERT(strncmp(err.msg, path, strlen(path)) == 0, "message does not name the file: %s", err.msg);
        close(fd);
        return 0;
    }
    uint64_t data_size = f.file_size - f.data_start;
    for (int i = 0; i < f.ntensors; i++) {
        const tr_st_tensor *t = &f.tensors[i];
        FUZZ_ASSERT(i == 0 || strcmp(f.tensors[i - 1].name, t->name) < 0, "names not sorted and unique");
        FUZZ_ASSERT(tr_st_find(&f, t->name) == t, "tr_st_find(%s)", t->name);
        FUZZ_ASSERT(t->begin <= t->end && t->end <= data_size, "offsets [%llu, %llu) outside %llu bytes",
                    (unsigned long long)t->begin, (unsigned long long)t->end, (unsigned long long)data_size);
        if ((strcmp(t->dtype, "F32") != 0 && strcmp(t->dtype, "BF16") != 0) || t->ndim > 4)
            continue;
        tr_err e = {{0}};
        FUZZ_ASSERT(tr_st_expect_float(&f, t->name, t->ndim, t->shape, &e), "expect_float: %s", e.msg);
        int64_t cols = t->ndim > 0 ? t->shape[t->ndim - 1] : 1, rows = 1;
        for (int k = 0; k + 1 < t->ndim; k++)
            rows = t->shape[k] == 0 ? 0 : rows * t->shape[k] > 4 ? 4 : rows * t->shape[k];
        int64_t nr = rows < 4 ? rows : 4, nc = cols < 4 ? cols : 4;
        float block[16];
        FUZZ_ASSERT(tr_st_read_block(&f, t->name, 0, nr, 0, nc, block, 4, &e), "read_block: %s", e.msg);
        tr_err e2 = {{0}};
        FUZZ_ASSERT(!tr_st_read_block(&f, t->name, 0, 1, cols, 1, block, 4, &e2), "read past the last column");
    }
    tr_err e = {{0}};
    FUZZ_ASSERT(!tr_st_expect_float(&f, "\x01no such tensor", 1, (int64_t[]){1}, &e), "found a missing tensor");
    tr_st_close(&f);
    close(fd);
    return 0;
}
