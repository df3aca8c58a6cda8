/*
 * fuzz_data.c - libFuzzer harness for the token-shard loader (runtime/tr_data.c).
 * The first byte picks what the rest is:
 *   even: a whole shard file, opened as a one-file pattern with B = 1 + (c>>1 & 3),
 *         S = 1 + (c>>3 & 7) and vocab 256 << (c>>6 & 3) (so most tokens of a
 *         random .bin are out of the vocabulary and some are in). A refusal
 *         leaves the loader closed and names the file. An accepted shard has at
 *         least B*S+1 tokens filling the file exactly; every batch of one epoch
 *         and one more is read, and each read either gives the tokens a plain
 *         decode of the input gives (.bin: uint16 at 1024 + 2i) or refuses a
 *         token outside the vocabulary, naming the file. The position wraps to
 *         offset 0 of epoch 1 after exactly tr_data_epoch_batches batches.
 *   odd:  a position string. tr_data_pos_parse either refuses it with a message
 *         naming it ("position"), or accepts it and tr_data_pos_format prints
 *         exactly the same string (the parse is strict: one spelling per position).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_file.h"
#include "tr_data.h"

static void fuzz_shard(uint8_t c, const uint8_t *data, size_t size)
{
    char path[64];
    int fd = fuzz_memfile(data, size, path, sizeof path);
    int64_t B = 1 + (c >> 1 & 3), S = 1 + (c >> 3 & 7), vocab = (int64_t)256 << (c >> 6 & 3);
    tr_data dl;
    tr_err err = {{0}};
    if (!tr_data_open(&dl, path, B, S, vocab, &err)) {
        FUZZ_ASSERT(dl.shards == NULL && dl.pattern == NULL && dl.scratch == NULL, "a failed open left state");
        FUZZ_ASSERT(strstr(err.msg, path) != NULL, "message does not name the file: %s", err.msg);
        close(fd);
        return;
    }
    FUZZ_ASSERT(dl.nshards == 1, "%d shards from one file", dl.nshards);
    const tr_data_shard *sh = &dl.shards[0];
    FUZZ_ASSERT(sh->ntok >= B * S + 1, "a shard of %lld tokens accepted for B*S+1 = %lld", (long long)sh->ntok,
                (long long)(B * S + 1));
    FUZZ_ASSERT(sh->data_off + (uint64_t)sh->ntok * (uint64_t)sh->elem == size, "tokens do not fill the file");
    bool bin = sh->kind == TR_DATA_BIN;
    if (bin)
        FUZZ_ASSERT(sh->data_off == 1024 && sh->elem == 2 && (int64_t)(data[8] | data[9] << 8 | data[10] << 16 |
                                                                       (uint32_t)data[11] << 24) == sh->ntok,
                    "a .bin's count is not its header's");
    int64_t per = tr_data_epoch_batches(&dl);
    FUZZ_ASSERT(per == (sh->ntok - 1) / (B * S), "epoch batches %lld", (long long)per);
    int32_t in[32], tg[32]; /* B*S <= 32 */
    for (int64_t k = 0; k <= per && k < 64; k++) {
        tr_data_pos p = tr_data_tell(&dl);
        FUZZ_ASSERT(p.offset == (k % per) * B * S && p.epoch == k / per, "batch %lld at offset %lld epoch %lld",
                    (long long)k, (long long)p.offset, (long long)p.epoch);
        tr_err e = {{0}};
        if (tr_data_read(&dl, 0, B, in, tg, &e)) {
            for (int64_t i = 0; i < B * S && bin; i++) {
                const uint8_t *q = data + 1024 + 2 * (p.offset + i);
                FUZZ_ASSERT(in[i] == (q[0] | q[1] << 8) && tg[i] == (q[2] | q[3] << 8), "token %lld",
                            (long long)i);
            }
            for (int64_t i = 0; i < B * S; i++)
                FUZZ_ASSERT(in[i] >= 0 && in[i] < vocab && tg[i] >= 0 && tg[i] < vocab, "token out of range read");
        } else {
            FUZZ_ASSERT(strstr(e.msg, path) && strstr(e.msg, "outside the vocabulary"), "read refused: %s", e.msg);
        }
        tr_data_next(&dl);
    }
    tr_data_close(&dl);
    close(fd);
}

static void fuzz_pos(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    if (!s)
        abort();
    memcpy(s, data, size);
    s[size] = '\0';
    tr_data_pos p;
    tr_err err = {{0}};
    if (tr_data_pos_parse(s, NULL, &p, &err)) {
        char out[TR_DATA_POS_CAP];
        FUZZ_ASSERT(tr_data_pos_format(&p, out, sizeof out) > 0, "format failed");
        FUZZ_ASSERT(strcmp(out, s) == 0, "parse then format gives '%s' for '%s'", out, s);
    } else {
        FUZZ_ASSERT(strncmp(err.msg, "position", 8) == 0, "message does not start with 'position': %s", err.msg);
    }
    free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    if (data[0] & 1)
        fuzz_pos(data + 1, size - 1);
    else
        fuzz_shard(data[0], data + 1, size - 1);
    return 0;
}
