/*
 * tr_npy.h - read and write NumPy .npy files of float32 (inputs, outputs,
 * reference activations).
 *
 * Format: "\x93NUMPY", major, minor, header length (u16 LE in v1.0, u32 LE in
 * v2.0/3.0), then a Python dict literal
 *   {'descr': '<f4', 'fortran_order': False, 'shape': (4, 16, 64), }
 * padded with spaces and '\n', then the raw C-order data.
 *
 * Reading maps the file read-only and validates everything at open: magic,
 * version, the dict literal (parsed, not pattern-matched), descr '<f4' only,
 * fortran_order False only, shape of at most 8 non-negative integers, and
 * data size == prod(shape) * 4 exactly (no truncation, no trailing bytes).
 * Blocks are then copied from the 2-D view [prod(shape[:-1]), shape[-1]].
 * Writing produces v1.0 '<f4' C-order files atomically (temp + fsync + rename),
 * readable by np.load.
 */
#ifndef TR_NPY_H
#define TR_NPY_H

#include <stdbool.h>
#include <stdint.h>

#include "tr_err.h"

#define TR_NPY_MAX_NDIM 8

typedef struct tr_npy {
    char path[1024];
    int fd;                    /* -1 when closed */
    uint64_t file_size;
    uint64_t data_off;         /* byte offset of the data in the file */
    int ndim;                  /* 0..8 */
    int64_t shape[TR_NPY_MAX_NDIM];
    const unsigned char *map;  /* [file_size] mmap of whole file, read-only */
} tr_npy;

/* Open a .npy v1.0/2.0/3.0 file; requires descr '<f4' and fortran_order
 * False; validates the data size equals prod(shape)*4 and fits the file.
 * On failure *f is left closed (tr_npy_close is a no-op). */
bool tr_npy_open(tr_npy *f, const char *path, tr_err *err);

/* tr_npy_open for a '<i4' (little-endian int32) array instead of '<f4', with
 * the same checks (token ids: runtime/tr_data.c); tr_npy_read_block does not
 * apply to it (it converts float32): read the bytes at data_off. */
bool tr_npy_open_i32(tr_npy *f, const char *path, tr_err *err);

/* Check the array has exactly shape[0..ndim). `what` names the array ("input";
 * NULL: "array"), `dims_names` names the dimensions without parentheses
 * ("batch, seq, hidden"; NULL: omitted). Message e.g.
 * "x.npy: input has shape (4, 16, 32), expected (batch, seq, hidden) = (4, 16, 64): ..." */
bool tr_npy_expect_shape(const tr_npy *f, int ndim, const int64_t *shape, const char *what, const char *dims_names,
                         tr_err *err);

/* View the array as 2-D [prod(shape[:-1]), shape[-1]] (a scalar is [1, 1]) and
 * copy the block rows [r0,r0+nr) x cols [c0,c0+nc) into dst (dst[r*ldd + c],
 * ldd >= nc floats). */
bool tr_npy_read_block(const tr_npy *f, int64_t r0, int64_t nr, int64_t c0, int64_t nc, float *dst, int64_t ldd,
                       tr_err *err);

/* Unmap and close; safe on a closed or failed-to-open file. */
void tr_npy_close(tr_npy *f);

/* Write data ([prod(shape)] floats, C order; may be NULL if that is 0) as a
 * v1.0 '<f4' C-order .npy, atomically (path.tmp.<pid>, fsync, rename; on
 * failure the temp file is removed and path is untouched). ndim in 0..8. */
bool tr_npy_write_atomic(const char *path, int ndim, const int64_t *shape, const float *data, tr_err *err);
/* The same for int32 data ('<i4'): generation's token ids (docs/GENERATE.md). */
bool tr_npy_write_i32_atomic(const char *path, int ndim, const int64_t *shape, const int32_t *data, tr_err *err);

#endif
