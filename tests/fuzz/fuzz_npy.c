/*
 * fuzz_npy.c - libFuzzer harness for the .npy reader (runtime/tr_npy.c). The
 * input is a whole file. An accepted file must be '<f4' C order with a shape
 * of at most 8 dimensions whose data exactly fills the rest of the file;
 * tr_npy_expect_shape must accept its own shape, and a corner block of the
 * 2-D view must read. A refused file leaves nothing open and the message
 * names the file.
 */
#include <stdint.h>
#include <string.h>

#include "fuzz_file.h"
#include "tr_npy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[64];
    int fd = fuzz_memfile(data, size, path, sizeof path);
    tr_npy f;
    tr_err err = {{0}};
    if (!tr_npy_open(&f, path, &err)) {
        FUZZ_ASSERT(f.map == NULL && f.fd == -1, "a failed open left resources");
        FUZZ_ASSERT(strncmp(err.msg, path, strlen(path)) == 0, "message does not name the file: %s", err.msg);
        close(fd);
        return 0;
    }
    FUZZ_ASSERT(f.ndim >= 0 && f.ndim <= TR_NPY_MAX_NDIM, "ndim %d", f.ndim);
    unsigned __int128 n = 1;
    for (int k = 0; k < f.ndim; k++) {
        FUZZ_ASSERT(f.shape[k] >= 0, "negative dimension");
        n *= (unsigned __int128)f.shape[k];
    }
    FUZZ_ASSERT(f.data_off <= f.file_size && n * 4 == f.file_size - f.data_off, "data does not fill the file");
    tr_err e = {{0}};
    FUZZ_ASSERT(tr_npy_expect_shape(&f, f.ndim, f.shape, "input", NULL, &e), "expect_shape: %s", e.msg);
    int64_t cols = f.ndim > 0 ? f.shape[f.ndim - 1] : 1, rows = cols ? (int64_t)(n / (unsigned __int128)cols) : 0;
    if (f.ndim > 0 && cols == 0)
        rows = 0;
    float block[16];
    int64_t nr = rows < 4 ? rows : 4, nc = cols < 4 ? cols : 4;
    FUZZ_ASSERT(tr_npy_read_block(&f, 0, nr, 0, nc, block, 4, &e), "read_block: %s", e.msg);
    tr_npy_close(&f);
    close(fd);
    return 0;
}
