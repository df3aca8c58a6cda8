/*
 * fuzz_spec.c - libFuzzer harness for the spec loader (gen/spec.c): the input
 * is a spec file run in the Lua sandbox (gen/sandbox.c) and validated.
 * Crashes, leaks and undefined behaviour are what ASan+UBSan report; a spec that escapes the
 * sandbox's time bound shows as a libFuzzer timeout (the fuzz build lowers
 * the bound to SANDBOX_MAX_SECONDS = 0.25 s, so -timeout=10 is a wide margin).
 * Properties: a refused spec has at least one message and each message line
 * starts with the file name; an accepted spec satisfies the rules that
 * downstream code assumes (positive sizes, divisibility, mesh size).
 */
#include <stdint.h>
#include <string.h>

#include "fuzz_file.h"
#include "spec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static tg_err err;
    tg_spec s;
    tg_err_clear(&err);
    if (!tg_spec_load_buffer("fuzz.lua", (const char *)data, size, &s, &err)) {
        FUZZ_ASSERT(err.count >= 1 && err.msg[0], "refused without a message");
        for (const char *line = err.msg; line; line = strchr(line, '\n')) {
            if (*line == '\n')
                line++;
            FUZZ_ASSERT(strncmp(line, "fuzz.lua", 8) == 0 || strncmp(line, "...", 3) == 0 || !*line,
                        "a message line does not start with the file: %.200s", line);
        }
        return 0;
    }
    FUZZ_ASSERT(s.q >= 1 && s.d >= 1 && (long long)s.q * s.q * s.d <= 65536, "mesh [%d,%d,%d]", s.q, s.q, s.d);
    FUZZ_ASSERT(s.layers >= 1 && s.hidden >= 1 && s.heads >= 1 && s.ffn >= 1 && s.seq >= 1 && s.batch >= 1,
                "a size below 1");
    FUZZ_ASSERT(s.hidden % s.heads == 0 && s.heads % s.q == 0 && s.hidden % s.q == 0 && s.ffn % s.q == 0 &&
                    s.batch % (s.q * s.d) == 0,
                "a divisibility rule is broken");
    FUZZ_ASSERT(s.name[0] && strlen(s.name) <= 100, "name");
    return 0;
}
