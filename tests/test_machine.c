/*
 * test_machine.c - unit tests of the machine description loader (gen/machine.c):
 * a full file and its values, the defaults, the shipped profiles in
 * specs/machines/, every rule broken (each message names the file and the
 * field), all problems reported at once, unknown keys with a suggestion, and
 * hostile files stopped by the sandbox (gen/sandbox.c) with messages that say
 * "machine file". Run from the repository root.
 */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "machine.h"
#include "tt.h"

static tg_machine M;
static tg_err E;

static bool load_as(const char *path, const char *src)
{
    tg_err_clear(&E);
    memset(&M, 0, sizeof M);
    return tg_machine_load_string(path, src, &M, &E);
}

static bool load(const char *src) { return load_as("machines/m.lua", src); }

static bool has(const char *text) { return strstr(E.msg, text) != NULL; }

/* Every message line starts with the file name. */
static bool all_lines_name(const char *path)
{
    size_t n = strlen(path);
    for (const char *line = E.msg; *line;) {
        if (strncmp(line, path, n) != 0 || line[n] != ':')
            return false;
        const char *nl = strchr(line, '\n');
        if (!nl)
            break;
        line = nl + 1;
    }
    return true;
}

static bool near(double a, double b) { return fabs(a - b) <= 1e-12 * fabs(b); }

#define LINKS "intra = { bandwidth_gbs = 200, latency_us = 2 }, inter = { bandwidth_gbs = 25, latency_us = 5 }, "
#define GEMM "gemm_tflops = { fp32 = 19.5, tf32 = 156, bf16 = 312 }, "
#define MEM "memory_bandwidth_gbs = 1555, memory_gib = 40"
#define OK_REST "ranks_per_node = 4, " LINKS GEMM MEM

int main(void)
{
    TT_CASE("a full machine file gives every field") {
        TT_CHECK(load("-- a comment\nlocal nv = 200\nreturn { name = \"a100-4\", ranks_per_node = 4,\n"
                      "  intra = { bandwidth_gbs = nv, latency_us = 2 }, inter = { bandwidth_gbs = 200 / 8, latency_us = 5 },\n"
                      "  gemm_tflops = { fp32 = 19.5, tf32 = 156, bf16 = 312 }, fp32_gemm = \"tf32\",\n"
                      "  memory_bandwidth_gbs = 1555, memory_gib = 40, launch_us = 5 }"),
                 "%.400s", E.msg);
        TT_CHECK(strcmp(M.name, "a100-4") == 0 && strcmp(M.path, "machines/m.lua") == 0, "%s %s", M.name, M.path);
        TT_CHECK(M.ranks_per_node == 4, "%d", M.ranks_per_node);
        TT_CHECK(M.intra.bandwidth_gbs == 200 && M.intra.latency_us == 2, "%g %g", M.intra.bandwidth_gbs,
                 M.intra.latency_us);
        TT_CHECK(M.inter.bandwidth_gbs == 25 && M.inter.latency_us == 5, "%g %g", M.inter.bandwidth_gbs,
                 M.inter.latency_us);
        TT_CHECK(M.gemm_tflops_fp32 == 19.5 && M.gemm_tflops_tf32 == 156 && M.gemm_tflops_bf16 == 312, "%g %g %g",
                 M.gemm_tflops_fp32, M.gemm_tflops_tf32, M.gemm_tflops_bf16);
        TT_CHECK(M.fp32_uses_tf32 == 1, "%d", M.fp32_uses_tf32);
        TT_CHECK(M.memory_bandwidth_gbs == 1555 && M.memory_gib == 40 && M.launch_us == 5, "%g %g %g",
                 M.memory_bandwidth_gbs, M.memory_gib, M.launch_us);
    }

    TT_CASE("defaults: name is the file stem, launch_us 0, fp32 GEMMs at the FP32 rate, absent rates 0") {
        TT_CHECK(load_as("dir/my-cluster.lua", "return { ranks_per_node = 8, " LINKS
                                               "gemm_tflops = { fp32 = 60 }, " MEM " }"),
                 "%.400s", E.msg);
        TT_CHECK(strcmp(M.name, "my-cluster") == 0, "%s", M.name);
        TT_CHECK(M.launch_us == 0 && M.fp32_uses_tf32 == 0 && M.gemm_tflops_tf32 == 0 && M.gemm_tflops_bf16 == 0,
                 "%g %d %g %g", M.launch_us, M.fp32_uses_tf32, M.gemm_tflops_tf32, M.gemm_tflops_bf16);
        TT_CHECK(load("return { " OK_REST ", fp32_gemm = \"fp32\", launch_us = 0 }"), "%.400s", E.msg);
        TT_CHECK(M.fp32_uses_tf32 == 0, "%d", M.fp32_uses_tf32);
    }

    TT_CASE("a latency of 0 is allowed, a bandwidth or rate of 0 is not") {
        TT_CHECK(load("return { ranks_per_node = 1, intra = { bandwidth_gbs = 1, latency_us = 0 }, "
                      "inter = { bandwidth_gbs = 1, latency_us = 0 }, " GEMM MEM " }"),
                 "%.400s", E.msg);
        TT_CHECK(!load("return { ranks_per_node = 1, intra = { bandwidth_gbs = 0, latency_us = 0 }, "
                       "inter = { bandwidth_gbs = 1, latency_us = 0 }, gemm_tflops = { fp32 = 0 }, " MEM " }"),
                 "accepted");
        TT_CHECK(E.count == 2 && has("machines/m.lua: intra.bandwidth_gbs = 0 is out of range: ") &&
                     has("must be between 0.001 and 100000 GB/s") &&
                     has("machines/m.lua: gemm_tflops.fp32 = 0 is out of range: "),
                 "%.600s", E.msg);
    }

    TT_CASE("the shipped profiles load: specs/machines/meluxina.lua and h100x8.lua") {
        tg_err_clear(&E);
        TT_CHECK(tg_machine_load("specs/machines/meluxina.lua", &M, &E), "%.400s", E.msg);
        TT_CHECK(strcmp(M.name, "meluxina") == 0 && M.ranks_per_node == 4, "%s %d", M.name, M.ranks_per_node);
        TT_CHECK(M.intra.bandwidth_gbs > 0 && near(M.inter.bandwidth_gbs, 25) && M.memory_gib == 40 &&
                     M.memory_bandwidth_gbs == 1555,
                 "%g %g %g %g", M.intra.bandwidth_gbs, M.inter.bandwidth_gbs, M.memory_gib, M.memory_bandwidth_gbs);
        TT_CHECK(M.gemm_tflops_fp32 > 0 && M.gemm_tflops_fp32 <= 19.5 && M.gemm_tflops_tf32 <= 156 &&
                     M.gemm_tflops_bf16 <= 312 && M.gemm_tflops_bf16 > 0,
                 "%g %g %g", M.gemm_tflops_fp32, M.gemm_tflops_tf32, M.gemm_tflops_bf16);
        tg_err_clear(&E);
        TT_CHECK(tg_machine_load("specs/machines/h100x8.lua", &M, &E), "%.400s", E.msg);
        TT_CHECK(strcmp(M.name, "h100x8") == 0 && M.ranks_per_node == 8 && M.memory_gib == 80, "%s %d %g", M.name,
                 M.ranks_per_node, M.memory_gib);
        TT_CHECK(M.intra.bandwidth_gbs == 450 && near(M.inter.bandwidth_gbs, 400) && M.memory_bandwidth_gbs == 3350,
                 "%g %g %g", M.intra.bandwidth_gbs, M.inter.bandwidth_gbs, M.memory_bandwidth_gbs);
        TT_CHECK(M.gemm_tflops_fp32 <= 67 && M.gemm_tflops_tf32 <= 494.7 && M.gemm_tflops_bf16 <= 989.4 &&
                     M.gemm_tflops_bf16 > 0,
                 "%g %g %g", M.gemm_tflops_fp32, M.gemm_tflops_tf32, M.gemm_tflops_bf16);
    }

    TT_CASE("an empty table: every required key is named, with its fix, all at once") {
        TT_CHECK(!load("return {}"), "accepted");
        TT_CHECK(E.count == 6, "%d: %.800s", E.count, E.msg);
        TT_CHECK(has("machines/m.lua: ranks_per_node is missing (the GPUs, or CPU ranks, of one node); "
                     "add ranks_per_node = 4"),
                 "%.800s", E.msg);
        TT_CHECK(has("machines/m.lua: intra is missing; add intra = { bandwidth_gbs = 200, latency_us = 2 }"),
                 "%.800s", E.msg);
        TT_CHECK(has("machines/m.lua: inter is missing; add inter = {"), "%.800s", E.msg);
        TT_CHECK(has("machines/m.lua: gemm_tflops is missing; add gemm_tflops = { fp32 = 19.5"), "%.800s", E.msg);
        TT_CHECK(has("machines/m.lua: memory_bandwidth_gbs is missing (") &&
                     has("add memory_bandwidth_gbs = 1555"),
                 "%.800s", E.msg);
        TT_CHECK(has("machines/m.lua: memory_gib is missing (the memory of one rank in GiB); add memory_gib = 40"),
                 "%.800s", E.msg);
        TT_CHECK(all_lines_name("machines/m.lua"), "%.800s", E.msg);
    }

    TT_CASE("missing keys inside intra, inter and gemm_tflops are named with their table") {
        TT_CHECK(!load("return { ranks_per_node = 4, intra = {}, inter = { bandwidth_gbs = 25 }, "
                       "gemm_tflops = { tf32 = 156 }, " MEM " }"),
                 "accepted");
        TT_CHECK(E.count == 4, "%d: %.800s", E.count, E.msg);
        TT_CHECK(has("machines/m.lua: intra.bandwidth_gbs is missing (one rank's link bandwidth inside a node, "
                     "GB/s each way); add bandwidth_gbs = 200 to intra"),
                 "%.800s", E.msg);
        TT_CHECK(has("machines/m.lua: intra.latency_us is missing") && has("machines/m.lua: inter.latency_us is missing"),
                 "%.800s", E.msg);
        TT_CHECK(has("machines/m.lua: gemm_tflops.fp32 is missing (a sustained GEMM rate in TFLOPS); "
                     "add fp32 = 19.5 to gemm_tflops"),
                 "%.800s", E.msg);
    }

    TT_CASE("ranks_per_node must be an integer in 1..65536") {
        const char *bad[] = {"0", "-2", "4.5", "70000", "\"4\"", "0/0", "{}"};
        const char *want[] = {"ranks_per_node = 0 is out of range", "ranks_per_node = -2 is out of range",
                              "ranks_per_node must be an integer (the GPUs, or CPU ranks, of one node), got 4.5",
                              "ranks_per_node = 70000 is out of range: the ranks of one node must be 1 to 65536",
                              "ranks_per_node must be an integer", "ranks_per_node must be an integer",
                              "got a table"};
        char src[1024];
        for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
            snprintf(src, sizeof src, "return { ranks_per_node = %s, " LINKS GEMM MEM " }", bad[k]);
            TT_CHECK(!load(src), "%s accepted", bad[k]);
            TT_CHECK(E.count == 1 && has("machines/m.lua: ") && has(want[k]), "%s: %.400s", bad[k], E.msg);
        }
        TT_CHECK(load("return { ranks_per_node = 65536.0, " LINKS GEMM MEM " }") && M.ranks_per_node == 65536,
                 "%.400s", E.msg);
    }

    TT_CASE("numbers must be finite and in range: NaN, inf, negative, a string") {
        TT_CHECK(!load("return { ranks_per_node = 4, intra = { bandwidth_gbs = 0/0, latency_us = -1 }, "
                       "inter = { bandwidth_gbs = math.huge, latency_us = \"5\" }, gemm_tflops = { fp32 = -19.5, "
                       "bf16 = 1e300 }, memory_bandwidth_gbs = true, memory_gib = -40, launch_us = -1 }"),
                 "accepted");
        TT_CHECK(E.count == 9, "%d: %.1500s", E.count, E.msg);
        TT_CHECK(has("machines/m.lua: intra.bandwidth_gbs = ") && has("intra.latency_us = -1 is out of range: the "
                                                                     "latency of one message in microseconds must be "
                                                                     "between 0 and 1000000 us"),
                 "%.1500s", E.msg);
        TT_CHECK(has("machines/m.lua: inter.bandwidth_gbs = inf is out of range") ||
                     has("machines/m.lua: inter.bandwidth_gbs = Inf"),
                 "%.1500s", E.msg);
        TT_CHECK(has("machines/m.lua: inter.latency_us must be a number (the latency of one message in "
                     "microseconds), got string \"5\"; use e.g. latency_us = 5"),
                 "%.1500s", E.msg);
        TT_CHECK(has("gemm_tflops.fp32 = -19.5 is out of range") && has("gemm_tflops.bf16 = 1e+300 is out of range"),
                 "%.1500s", E.msg);
        TT_CHECK(has("memory_bandwidth_gbs must be a number") && has("got boolean true") &&
                     has("memory_gib = -40 is out of range") && has("launch_us = -1 is out of range"),
                 "%.1500s", E.msg);
        TT_CHECK(all_lines_name("machines/m.lua"), "%.1500s", E.msg);
    }

    TT_CASE("rates where no machine is are refused (5e-324 made --advise print inf and nan); the ends are accepted") {
        TT_CHECK(!load("return { ranks_per_node = 4, intra = { bandwidth_gbs = 5e-324, latency_us = 1e300 }, "
                       "inter = { bandwidth_gbs = 2e5, latency_us = 5 }, gemm_tflops = { fp32 = 5e-324, "
                       "tf32 = 1e-4, bf16 = 1e6 }, memory_bandwidth_gbs = 1e-300, memory_gib = 1e-9, launch_us = 2e6 }"),
                 "accepted");
        TT_CHECK(E.count == 9, "%d: %.2000s", E.count, E.msg);
        TT_CHECK(has("machines/m.lua: intra.bandwidth_gbs = 4.9406564584124654e-324 is out of range: one rank's link "
                     "bandwidth inside a node, GB/s each way must be between 0.001 and 100000 GB/s, what a machine "
                     "can have (a unit slip, bits for bytes or B/s for GB/s, lands outside); use e.g. "
                     "bandwidth_gbs = 200") ||
                     has("machines/m.lua: intra.bandwidth_gbs = 4.94"),
                 "%.2000s", E.msg);
        TT_CHECK(has("intra.latency_us = 1e+300 is out of range") && has("inter.bandwidth_gbs = 200000 is out of range") &&
                     has("gemm_tflops.fp32 = ") && has("gemm_tflops.tf32 = 0.0001 is out of range") &&
                     has("gemm_tflops.bf16 = 1000000 is out of range") && has("memory_bandwidth_gbs = 1e-300 is out") &&
                     has("memory_gib = 1e-09 is out of range: the memory of one rank in GiB must be between 1e-06 and "
                         "1000000 GiB") &&
                     has("launch_us = 2000000 is out of range"),
                 "%.2000s", E.msg);
        TT_CHECK(all_lines_name("machines/m.lua"), "%.2000s", E.msg);
        TT_CHECK(load("return { ranks_per_node = 4, intra = { bandwidth_gbs = 1e-3, latency_us = 1e6 }, "
                      "inter = { bandwidth_gbs = 1e5, latency_us = 0 }, gemm_tflops = { fp32 = 1e-3, "
                      "tf32 = 1e5, bf16 = 1e5 }, memory_bandwidth_gbs = 1e-3, memory_gib = 1e-6, launch_us = 1e6 }") &&
                     M.intra.bandwidth_gbs == 1e-3 && M.memory_gib == 1e-6 && M.launch_us == 1e6,
                 "the ends: %.2000s", E.msg);
    }

    TT_CASE("fp32_gemm = \"tf32\" requires gemm_tflops.tf32; other values are refused") {
        TT_CHECK(!load("return { ranks_per_node = 4, " LINKS "gemm_tflops = { fp32 = 19.5 }, fp32_gemm = \"tf32\", "
                       MEM " }"),
                 "accepted");
        TT_CHECK(E.count == 1 && has("machines/m.lua: fp32_gemm = \"tf32\" needs gemm_tflops.tf32: ") &&
                     has("add tf32 = <TFLOPS> to gemm_tflops, or use fp32_gemm = \"fp32\""),
                 "%.400s", E.msg);
        TT_CHECK(!load("return { " OK_REST ", fp32_gemm = \"bf16\" }"), "accepted");
        TT_CHECK(E.count == 1 && has("machines/m.lua: fp32_gemm = string \"bf16\" is not a choice: use \"fp32\""),
                 "%.400s", E.msg);
        TT_CHECK(!load("return { " OK_REST ", fp32_gemm = \"tf32\\0x\" }"), "embedded NUL accepted");
        TT_CHECK(!load("return { " OK_REST ", fp32_gemm = 32 }"), "a number accepted");
    }

    TT_CASE("unknown keys are named with a suggestion, sorted, at every level") {
        TT_CHECK(!load("return { " OK_REST ", memory_bandwidth = 1, gpus_per_node = 4, [1] = 5, "
                       "frobnicate = 1 }"),
                 "accepted");
        TT_CHECK(has("machines/m.lua: memory_bandwidth is not a known key; did you mean memory_bandwidth_gbs?"),
                 "%.800s", E.msg);
        TT_CHECK(has("machines/m.lua: frobnicate is not a known key; the keys of the machine table are name, "
                     "ranks_per_node, intra"),
                 "%.800s", E.msg);
        TT_CHECK(has("machines/m.lua: the machine table has an entry with key [1]: write fields as name = value"),
                 "%.800s", E.msg);
        TT_CHECK(has("machines/m.lua: gpus_per_node is not a known key"), "%.800s", E.msg);
        TT_CHECK(E.count == 4, "%d: %.800s", E.count, E.msg);
        TT_CHECK(!load("return { ranks_per_node = 4, intra = { bandwith_gbs = 200, latency_us = 2 }, "
                       "inter = { bandwidth_gbs = 25, latency_us = 5, latency = 1 }, "
                       "gemm_tflops = { fp32 = 19.5, fp64 = 9.7 }, " MEM " }"),
                 "accepted");
        TT_CHECK(has("machines/m.lua: intra.bandwith_gbs is not a known key; did you mean intra.bandwidth_gbs?") &&
                     has("machines/m.lua: intra.bandwidth_gbs is missing"),
                 "%.800s", E.msg);
        TT_CHECK(has("machines/m.lua: inter.latency is not a known key; did you mean inter.latency_us?"), "%.800s",
                 E.msg);
        TT_CHECK(has("machines/m.lua: gemm_tflops.fp64 is not a known key"), "%.800s", E.msg);
        TT_CHECK(all_lines_name("machines/m.lua"), "%.800s", E.msg);
    }

    TT_CASE("not a table, wrong sub-table types, bad names") {
        TT_CHECK(!load("return 5"), "accepted");
        TT_CHECK(has("machines/m.lua: the machine file must return a table, got 5"), "%.400s", E.msg);
        TT_CHECK(!load("local x = 1"), "accepted");
        TT_CHECK(has("machines/m.lua: the machine file must return a table, got nothing"), "%.400s", E.msg);
        TT_CHECK(!load("return { ranks_per_node = 4, intra = 200, inter = \"ib\", gemm_tflops = 19.5, " MEM " }"),
                 "accepted");
        TT_CHECK(E.count == 3 && has("machines/m.lua: intra must be a table such as { bandwidth_gbs = 200, "
                                     "latency_us = 2 }, got 200") &&
                     has("inter must be a table") && has("gemm_tflops must be a table"),
                 "%.600s", E.msg);
        TT_CHECK(!load("return { name = \"my cluster\", " OK_REST " }"), "accepted");
        TT_CHECK(has("machines/m.lua: name = \"my cluster\" is not a valid name"), "%.400s", E.msg);
        TT_CHECK(!load_as("dir/bad name.lua", "return { " OK_REST " }"), "accepted");
        TT_CHECK(has("dir/bad name.lua: the file stem \"bad name\" is not a valid machine name"), "%.400s", E.msg);
        TT_CHECK(!load("return { name = 7, " OK_REST " }") && has("name must be a string"), "%.400s", E.msg);
    }

    TT_CASE("a Lua error names the file and line") {
        TT_CHECK(!load("return {\n ranks_per_node = 4 +\n}"), "accepted");
        TT_CHECK(has("machines/m.lua:3: ") && E.count == 1, "%.400s", E.msg);
        TT_CHECK(!load("error('no such cluster')"), "accepted");
        TT_CHECK(has("machines/m.lua:1: no such cluster"), "%.400s", E.msg);
    }

    TT_CASE("sandbox: an infinite loop in a machine file is stopped, noun \"machine file\"") {
        TT_CHECK(!load("while true do end"), "accepted");
        TT_CHECK(strcmp(E.msg, "machines/m.lua: the machine file ran more than 10000000 Lua instructions: a machine "
                               "file is a table of numbers; remove loops that do not end") == 0,
                 "%.400s", E.msg);
    }

    TT_CASE("sandbox: a memory bomb in a machine file is stopped, noun \"machine file\"") {
        TT_CHECK(!load("local s = 'x'\nwhile true do s = s .. s end"), "accepted");
        TT_CHECK(strcmp(E.msg, "machines/m.lua: the machine file used more than 64 MiB of memory: a machine file is a "
                               "table of numbers; remove code that builds huge strings or tables") == 0,
                 "%.400s", E.msg);
        TT_CHECK(!load("return { name = string.rep('x', 1 << 30) }"), "accepted");
        TT_CHECK(has("the machine file used more than 64 MiB of memory"), "%.400s", E.msg);
    }

    TT_CASE("sandbox: no os, io, require in a machine file") {
        TT_CHECK(!load("os.execute('touch /tmp/tessgen-machine-escape')\nreturn {}"), "accepted");
        TT_CHECK(has("machines/m.lua:1: ") && has("'os'"), "%.400s", E.msg);
        TT_CHECK(!load("local f = io.open('/etc/passwd')\nreturn {}") && has("'io'"), "%.400s", E.msg);
        TT_CHECK(!load("require('x')\nreturn {}") && has("'require'"), "%.400s", E.msg);
    }

    TT_CASE("a file over 1 MiB is refused; a missing file names the path") {
        size_t n = (1u << 20) + 16;
        char *big = malloc(n + 1);
        TT_CHECK(big != NULL, "malloc");
        if (big) {
            memset(big, ' ', n);
            big[n] = '\0';
            memcpy(big, "return {}", 9);
            TT_CHECK(!load(big), "accepted");
            TT_CHECK(strcmp(E.msg, "machines/m.lua: the machine file is larger than 1048576 bytes: a machine file is "
                                   "a table of numbers") == 0,
                     "%.400s", E.msg);
            free(big);
        }
        tg_err_clear(&E);
        TT_CHECK(!tg_machine_load("specs/machines/no-such-cluster.lua", &M, &E), "accepted");
        TT_CHECK(has("specs/machines/no-such-cluster.lua: cannot read machine file: "), "%.400s", E.msg);
    }

    TT_EXIT();
}
