/*
 * tr_safetensors.h - read and write safetensors files (weights, gradients).
 *
 * Format: u64 little-endian header length N, then N bytes of JSON
 *   {"name": {"dtype": "F32", "shape": [r, c], "data_offsets": [begin, end]}, ...,
 *    "__metadata__": {"key": "string", ...}}     (metadata optional; tr_st_metadata reads it)
 * then the data; offsets are relative to the data start 8 + N.
 *
 * Reading: tr_st_open() maps the whole file read-only and validates the header
 * completely (JSON, types, integer shapes, size = prod(shape) * itemsize,
 * bounds, overlaps, duplicates), so later calls only check the request.
 * Tensors of any known dtype may be present; F32 and BF16 ones can be
 * requested (each tensor may be either), BF16 widened exactly to float32
 * (tr_bf16.h). tr_st_read_block() copies one 2-D block through the mapping,
 * so a rank touches only the pages of its own shard. Host must be
 * little-endian (checked).
 *
 * Writing: tr_st_write_atomic() writes F32 or BF16 tensors (BF16 rounded to
 * nearest, ties to even; a finite value that would round to an infinity is
 * refused, nothing written) to path.tmp.<pid>, fsyncs,
 * renames over path; on any failure the temp file is removed and path is
 * untouched. Temps left by a killed writer are removed by the next write of
 * the same path; tr_st_check_output() tells before a run whether a path can
 * be written.
 *
 * The low-level helpers at the end (map a file, write a file atomically, check
 * an output path, copy a block out of a row-major F32 matrix) are shared with
 * tr_npy.c, tr_trace.c and tr_main.c.
 */
#ifndef TR_SAFETENSORS_H
#define TR_SAFETENSORS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tr_err.h"

/* Largest header accepted; a bigger length field means "not a safetensors file". */
#define TR_ST_MAX_HEADER 100000000ull
/* Size of tr_st_tensor.name: names are at most 159 bytes. */
#define TR_ST_NAME_CAP 160

typedef struct tr_st_tensor {
    char name[TR_ST_NAME_CAP];
    char dtype[8];     /* "F32", "F16", "BF16", "I64", ... (as in the header) */
    int ndim;          /* number of dimensions; may exceed 4 for tensors never requested */
    int64_t shape[4];  /* the first min(ndim, 4) dimensions */
    uint64_t begin, end; /* byte offsets relative to data start */
} tr_st_tensor;

typedef struct tr_st_file {
    char path[1024];
    int fd;                     /* -1 when closed */
    uint64_t file_size;
    uint64_t data_start;        /* 8 + header_len */
    int ntensors;               /* excluding __metadata__ */
    tr_st_tensor *tensors;      /* [ntensors], sorted by name (strcmp) */
    const unsigned char *map;   /* [file_size] mmap of whole file, read-only */
} tr_st_file;

/* Open path, parse and validate the header, mmap the file. On failure *f is
 * left closed (tr_st_close is then a no-op) and err names the file and the
 * tensor/field at fault. */
bool tr_st_open(tr_st_file *f, const char *path, tr_err *err);

/* The tensor called `name`, or NULL. Binary search. */
const tr_st_tensor *tr_st_find(const tr_st_file *f, const char *name);

/* Check tensor `name` exists, is F32 or BF16 and has exactly shape[0..ndim);
 * the message names file, tensor, found vs expected dtype or shape, and the fix. */
bool tr_st_expect_float(const tr_st_file *f, const char *name, int ndim, const int64_t *shape, tr_err *err);

/* Copy the 2-D block rows [r0, r0+nr) x cols [c0, c0+nc) of F32 or BF16
 * tensor `name` (BF16 widened exactly) into dst (dst[r*ldd + c], r < nr, c < nc; ldd >= nc floats). The tensor is
 * viewed as 2-D [prod(shape[:-1]), shape[-1]]: a 1-D tensor [n] is [1, n], a
 * scalar is [1, 1]. Only these bytes of the file are touched. */
bool tr_st_read_block(const tr_st_file *f, const char *name, int64_t r0, int64_t nr, int64_t c0, int64_t nc,
                      float *dst, int64_t ldd, tr_err *err);

/* Unmap and close; safe on a closed or failed-to-open file. */
void tr_st_close(tr_st_file *f);

/* One tensor to write: data is [prod(shape[0..ndim))] row-major floats
 * (may be NULL when that product is 0). ndim in 0..4. */
typedef struct tr_st_out {
    const char *name;
    int ndim;
    int64_t shape[4];
    const float *data;
} tr_st_out;

/* The dtype a file is written in: TR_ST_F32 stores the floats as they are,
 * TR_ST_BF16 each rounded to nearest, ties to even (tr_bf16.h). */
typedef enum tr_st_dtype { TR_ST_F32 = 0, TR_ST_BF16 = 1 } tr_st_dtype;

/* Write tensors[0..n) to path atomically (path.tmp.<pid>, fsync, rename; on
 * any failure the temp file is removed and path is untouched). Header keys
 * sorted by name, data contiguous in that order, header padded with spaces to
 * a multiple of 8. Names must be non-empty, unique, < 160 bytes, valid UTF-8
 * (the header is JSON; the reader refuses anything else), and not
 * "__metadata__". Every tensor is stored as F32. */
bool tr_st_write_atomic(const char *path, const tr_st_out *tensors, int n, tr_err *err);

/* tr_st_write_atomic with every tensor stored as dtype. With TR_ST_BF16 a
 * finite value that rounds past the largest finite bf16 is refused (the
 * message names the tensor and the element) before any file is created. */
bool tr_st_write_atomic_as(const char *path, const tr_st_out *tensors, int n, tr_st_dtype dtype, tr_err *err);

/* tr_st_write_atomic_as with a __metadata__ object of string values: meta[2k] is key k, meta[2k+1]
 * its value (UTF-8, else refused), k < nmeta; written first in the header. */
bool tr_st_write_atomic_meta(const char *path, const tr_st_out *tensors, int n, tr_st_dtype dtype,
                             const char *const *meta, int nmeta, tr_err *err);

/* The __metadata__ value of key in the open file f into out (cap bytes, NUL-terminated); false when the
 * file has no such key, or its value has a NUL or does not fit. */
bool tr_st_metadata(const tr_st_file *f, const char *key, char *out, size_t cap);

/* Bytes per element of a safetensors dtype name, 0 if unknown; *bits gets the
 * bits per element (sub-byte types F4/F6_* have itemsize 0 and bits 4/6). */
int tr_st_dtype_size(const char *dtype, int *bits);

/* ---- low-level helpers, shared with tr_npy.c ---------------------------- */

/* Open path read-only, require a regular non-empty file, mmap it whole. A FIFO, device or socket is
 * refused before it is opened for reading (and the open cannot block), so a pipe never hangs a run.
 * `kind` ("safetensors file", ".npy file") only flavours the messages. */
bool tr_st_map_file(const char *path, const char *kind, int *fd, uint64_t *size, const unsigned char **map,
                    tr_err *err);

/* Read a whole JSON file (an index, config.json, manifest.json) into *doc, which owns its strings: mapped
 * with tr_st_map_file (so a FIFO is refused, not waited on), parsed strictly, unmapped. `what` names the
 * file in messages. On failure *doc is empty (safe to tr_json_free) and err says why. */
struct tr_json_doc;
bool tr_st_read_json(const char *path, const char *what, struct tr_json_doc *doc, tr_err *err);

/* Write the concatenation of parts[0..nparts) (lens[i] bytes each) to path
 * atomically: path.tmp.<pid>, held with an fcntl write lock, fsync, rename,
 * fsync the directory. On failure the temp file is removed and path is
 * untouched. Stale temps of path are removed first (tr_st_clean_stale_temps). */
bool tr_st_write_file_atomic(const char *path, const void *const *parts, const size_t *lens, int nparts,
                             tr_err *err);

/* Remove the temp files a killed writer left for path: entries "<base>.tmp.<digits>" in its
 * directory that are regular files of this user and that no process holds locked (every
 * writer holds its temp locked until the rename, so an unlocked one has no live writer; on a
 * file system without fcntl locks nothing is removed). Returns how many were removed. */
int tr_st_clean_stale_temps(const char *path);

/* Can tr_st_write_file_atomic write path? For checking every output before a run does any
 * work: the name is not empty and not a directory, nothing but a regular file or a symlink is
 * there, and a temp file can be created (and is removed again) in its directory. `what` names
 * the option ("--output"); the message names it, the path, the reason and the fix. */
bool tr_st_check_output(const char *path, const char *what, tr_err *err);

/* Copy block rows [r0,r0+nr) x cols [c0,c0+nc) out of src, a row-major
 * [rows, cols] little-endian F32 matrix (any alignment), into dst with leading
 * dimension ldd. Checks the range; `path` and `name` only flavour messages. */
bool tr_st_copy_block(const unsigned char *src, int64_t rows, int64_t cols, int64_t r0, int64_t nr, int64_t c0,
                      int64_t nc, float *dst, int64_t ldd, const char *path, const char *name, tr_err *err);

/* True on a little-endian host; otherwise fills err (naming path) and returns false. */
bool tr_st_host_le(const char *path, tr_err *err);

#endif
