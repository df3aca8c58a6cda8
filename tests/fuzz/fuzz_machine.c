/*
 * fuzz_machine.c - libFuzzer harness for the machine file loader (gen/machine.c):
 * the input is a machine file run in the Lua sandbox (gen/sandbox.c) and
 * validated. Crashes, leaks and undefined behaviour are what ASan+UBSan report;
 * a file that escapes the sandbox's time bound shows as a libFuzzer timeout (the
 * fuzz build lowers the bound to SANDBOX_MAX_SECONDS = 0.25 s, as for fuzz_spec).
 * Properties: a refused file has at least one message and each message line
 * starts with the file name; an accepted file has every field in its range
 * (bandwidths and rates 1e-3..1e5, latencies 0..1e6 us), which the cost model
 * relies on (it divides by every rate and bandwidth; every time stays finite).
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "fuzz_file.h"
#include "machine.h"

/* the ranges of gen/machine.c (specs/machines/README.md): physically meaningful, so every derived time is finite */
static int positive(double x) { return isfinite(x) && x >= 1e-3 && x <= 1e5; }
static int nonneg(double x) { return isfinite(x) && x >= 0 && x <= 1e6; }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static tg_err err;
    tg_machine m;
    tg_err_clear(&err);
    if (!tg_machine_load_buffer("fuzz.lua", (const char *)data, size, &m, &err)) {
        FUZZ_ASSERT(err.count >= 1 && err.msg[0], "refused without a message");
        for (const char *line = err.msg; line; line = strchr(line, '\n')) {
            if (*line == '\n')
                line++;
            FUZZ_ASSERT(strncmp(line, "fuzz.lua", 8) == 0 || strncmp(line, "...", 3) == 0 || !*line,
                        "a message line does not start with the file: %.200s", line);
        }
        return 0;
    }
    FUZZ_ASSERT(m.ranks_per_node >= 1 && m.ranks_per_node <= 65536, "ranks_per_node %d", m.ranks_per_node);
    FUZZ_ASSERT(positive(m.intra.bandwidth_gbs) && positive(m.inter.bandwidth_gbs), "a bandwidth");
    FUZZ_ASSERT(nonneg(m.intra.latency_us) && nonneg(m.inter.latency_us) && nonneg(m.launch_us), "a latency");
    FUZZ_ASSERT(positive(m.gemm_tflops_fp32) && (m.gemm_tflops_tf32 == 0 || positive(m.gemm_tflops_tf32)) &&
                    (m.gemm_tflops_bf16 == 0 || positive(m.gemm_tflops_bf16)),
                "a rate");
    FUZZ_ASSERT(!m.fp32_uses_tf32 || m.gemm_tflops_tf32 > 0, "fp32_gemm = tf32 without a tf32 rate");
    FUZZ_ASSERT(positive(m.memory_bandwidth_gbs) && isfinite(m.memory_gib) && m.memory_gib >= 1e-6 &&
                    m.memory_gib <= 1e6,
                "memory");
    FUZZ_ASSERT(m.name[0] && strlen(m.name) <= 100, "name");
    return 0;
}
