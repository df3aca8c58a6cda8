/*
 * fuzz_ckpt.c - libFuzzer harness for the checkpoint reader: rank 0's validation of a --resume file
 * (tr_ckpt_check in runtime/tr_ckpt.c, built with -DTR_CKPT_READER_ONLY: no MPI), on a whole file, for a
 * tiny fixed model (2 layers' worth of names, hidden 4: one 1-D and one 2-D parameter, as tr_rank_desc
 * lists them). The input's size picks the options: bit 0 --reshard, bit 1 the data check (this run's data
 * "synthetic"). A refusal must name the file. An accepted file must keep every promise tr_ckpt_resume
 * relies on afterwards: format tag and every model dimension equal to the build's, the mesh and dtype the
 * build's unless --reshard, the data "synthetic" (or unrecorded) when checked, a step in 0..INT_MAX, a
 * data position that fits its buffer and is UTF-8, exactly 3 tensors per parameter (itself, adam_m.,
 * adam_v.), each F32 of the full shape with its bytes inside the file, and the checksum of the metadata
 * equal to FNV-1a 64 recomputed here from the raw bytes (not through the reader's block copy).
 * Seeds (corpus/ckpt): checkpoints of this model written by tests/fuzz/mkckpt.py.
 */
#include <inttypes.h>
#include <limits.h>
#include <stdint.h>
#include <string.h>

#include "fuzz_file.h"
#include "tr_ckpt.h"
#include "tr_json.h"
#include "tr_safetensors.h"

/* the build this harness stands for (the fields tr_ckpt.c reads) */
const tr_model_desc tr_model = {.name = "fuzz_ckpt", .spec_path = "fuzz.lua", .tessgen_version = "0",
                                .fingerprint = "0123456789abcdef", .q = 1, .d = 1, .p = 1, .si = 1, .sj = 1,
                                .sk = 1, .layers = 1, .hidden = 4, .heads = 1, .ffn = 16, .seq = 2, .batch = 1,
                                .eps = 1e-5, .mode = 1, .lr = 1e-3, .beta1 = 0.9, .beta2 = 0.999,
                                .adam_eps = 1e-8};

const char *tr_mesh_text(void)
{
    return "[1,1,1]";
}

static const tr_param fuzz_params[2] = {
    {.name = "h.0.ln_1.weight", .ndim = 1, .full = {4, 0}, .rows = 1, .cols = 4},
    {.name = "h.0.attn.c_attn.weight", .ndim = 2, .full = {4, 12}, .rows = 4, .cols = 12},
};

static uint64_t fnv(uint64_t h, const unsigned char *b, uint64_t n)
{
    for (uint64_t e = 0; e < n; e++)
        h = (h ^ b[e]) * 0x100000001b3ULL;
    return h;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tr_rank_desc d;
    memset(&d, 0, sizeof d);
    d.nparams = 2;
    d.params = fuzz_params;
    int reshard = size & 1, check_data = size >> 1 & 1;
    tr_ckpt_set_data("synthetic");
    char path[64], pos[TR_CKPT_DATA_POS_CAP];
    int fd = fuzz_memfile(data, size, path, sizeof path);
    static tr_ckpt_state st;
    memset(&st, 0, sizeof st);
    tr_err err = {{0}};
    if (!tr_ckpt_check(&d, path, reshard, check_data, &st, pos, &err)) {
        FUZZ_ASSERT(err.msg[0] && strstr(err.msg, path) != NULL, "a refusal does not name the file: %s", err.msg);
        close(fd);
        return 0;
    }
    FUZZ_ASSERT(st.step >= 0 && st.step <= INT_MAX, "step %lld accepted", st.step);
    size_t pl = strnlen(pos, sizeof pos);
    FUZZ_ASSERT(pl < sizeof pos && tr_json_utf8_check(pos, pl) == pl, "data_pos not a UTF-8 string in its buffer");
    if (check_data)
        FUZZ_ASSERT(!st.data[0] || strcmp(st.data, "synthetic") == 0, "data %s accepted for a synthetic run", st.data);
    if (!reshard)
        FUZZ_ASSERT(strcmp(st.mesh, "[1,1,1]") == 0 && (!st.dtype[0] || strcmp(st.dtype, "fp32") == 0),
                    "mesh %s, dtype %s accepted without --reshard", st.mesh, st.dtype);
    /* the file again, read here: tensors, shapes, bytes and the checksum */
    tr_st_file f;
    FUZZ_ASSERT(tr_st_open(&f, path, &err), "an accepted checkpoint does not open: %s", err.msg);
    char v[256];
    FUZZ_ASSERT(tr_st_metadata(&f, "format", v, sizeof v) && strcmp(v, TR_CKPT_FORMAT) == 0, "format %s", v);
    static const char *const dims[][2] = {{"model.layers", "1"}, {"model.hidden", "4"}, {"model.heads", "1"},
                                          {"model.ffn", "16"},   {"model.seq", "2"},    {"model.batch", "1"}};
    for (size_t k = 0; k < sizeof dims / sizeof dims[0]; k++)
        FUZZ_ASSERT(tr_st_metadata(&f, dims[k][0], v, sizeof v) && strcmp(v, dims[k][1]) == 0, "%s = %s accepted",
                    dims[k][0], v);
    FUZZ_ASSERT(f.ntensors == 6, "%d tensors accepted, want 6", f.ntensors);
    uint64_t h = 0xcbf29ce484222325ULL;
    for (int i = 0; i < 2; i++) {
        static const char *const pre[3] = {"", "adam_m.", "adam_v."};
        for (int k = 0; k < 3; k++) {
            char name[96];
            snprintf(name, sizeof name, "%s%s", pre[k], fuzz_params[i].name);
            const tr_st_tensor *t = tr_st_find(&f, name);
            FUZZ_ASSERT(t != NULL, "tensor %s missing from an accepted checkpoint", name);
            uint64_t n = fuzz_params[i].ndim == 1 ? 4 : 48;
            FUZZ_ASSERT(strcmp(t->dtype, "F32") == 0 && t->ndim == fuzz_params[i].ndim &&
                            t->shape[0] == fuzz_params[i].full[0] &&
                            (t->ndim == 1 || t->shape[1] == fuzz_params[i].full[1]),
                        "tensor %s of dtype %s, %d dims accepted", name, t->dtype, t->ndim);
            FUZZ_ASSERT(t->end - t->begin == 4 * n && f.data_start + t->end <= size, "tensor %s bytes %" PRIu64
                        "..%" PRIu64 " accepted", name, t->begin, t->end);
            h = fnv(h, data + f.data_start + t->begin, 4 * n);
        }
    }
    char want[40];
    snprintf(want, sizeof want, "fnv1a64:%016" PRIx64, h);
    FUZZ_ASSERT(tr_st_metadata(&f, "checksum", v, sizeof v) && strcmp(v, want) == 0,
                "checksum %s accepted, the bytes give %s", v, want);
    tr_st_close(&f);
    close(fd);
    return 0;
}
