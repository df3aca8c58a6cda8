/*
 * fuzz_hfconfig.c - libFuzzer harness for the Hugging Face config.json reader
 * (gen/hf_config.c, tessgen --from-hf): the first byte chooses the request
 * (mode, --blocks-only, the megatron scheme, a mesh of 1 or 2), the rest is
 * config.json's text, given to tg_hf_spec_text as tg_hf_spec gives the file it
 * read. Its JSON goes through the runtime's parser (runtime/tr_json.c), its
 * values through hf_config.c's rules and the printed spec through the spec
 * loader in the Lua sandbox (gen/spec.c, gen/sandbox.c: the fuzz build lowers
 * the sandbox's bounds as for fuzz_spec). Properties: a refusal has messages,
 * each line starting with the file name and nothing printed; an accepted config
 * prints a spec that tessgen's loader accepts again as it is and that holds the
 * mesh asked for.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_file.h"
#include "hf_config.h"
#include "spec.h"

#define FUZZ_PATH "fuzz-hf/config.json"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    static tg_err err;
    tg_err_clear(&err);
    unsigned sel = data[0];
    tg_hf_request r = {.dir = "fuzz-hf", .scheme = (sel & 4) ? TG_SCHEME_MEGATRON : TG_SCHEME_TESSERACT,
                       .q = (sel & 8) ? 2 : 1, .d = 1, .p = (sel & 8) ? 2 : 1, .seq = 8, .batch = 12,
                       .mode = (sel & 1) ? TG_TRAIN : TG_INFER, .blocks_only = (sel & 2) != 0};
    char *text = malloc(size); /* the config's text, NUL-terminated as read_config leaves it */
    if (!text)
        abort();
    memcpy(text, data + 1, size - 1);
    text[size - 1] = '\0';
    tg_sb spec, warn;
    tg_sb_init(&spec);
    tg_sb_init(&warn);
    bool ok = tg_hf_spec_text(&r, FUZZ_PATH, text, size - 1, &spec, &warn, &err);
    free(text);
    if (!ok) {
        FUZZ_ASSERT(err.count >= 1 && err.msg[0], "refused without a message");
        FUZZ_ASSERT(spec.len == 0, "refused, yet a spec was printed");
        for (const char *line = err.msg; line; line = strchr(line, '\n')) {
            if (*line == '\n')
                line++;
            FUZZ_ASSERT(strncmp(line, FUZZ_PATH, strlen(FUZZ_PATH)) == 0 || strncmp(line, "...", 3) == 0 || !*line,
                        "a message line does not start with the file: %.200s", line);
        }
    } else {
        static tg_err lerr;
        tg_err_clear(&lerr);
        tg_spec s;
        FUZZ_ASSERT(spec.len > 0 && strstr(spec.s, "return {"), "accepted, yet no spec printed");
        FUZZ_ASSERT(tg_spec_load_string("printed.lua", spec.s, &s, &lerr), "the printed spec is refused: %.300s",
                    lerr.msg);
        FUZZ_ASSERT(r.scheme == TG_SCHEME_MEGATRON ? s.p == r.p : (s.q == r.q && s.d == r.d), "another mesh");
        FUZZ_ASSERT(s.mode == r.mode, "another mode");
    }
    tg_sb_free(&spec);
    tg_sb_free(&warn);
    return 0;
}
