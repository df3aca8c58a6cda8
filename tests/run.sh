#!/usr/bin/env bash
# tests/run.sh - the whole test suite, one command on a fresh machine:
# installs missing Debian packages (scripts/deps.sh), builds tessgen, the
# runtime and the unit tests (normal and ASan+UBSan), then runs
#   unit      mesh, spec, machine, plan, streams, placement, file-I/O, data, bf16 kernel and CPU kernel (AdamW, loss,
#             expf, thread counts) unit tests, both builds; no errno-setting math calls in the runtime's kernels;
#             the planner's files call one way (tools/plandeps.py); the suite's own counting of passes, failures and
#             skips (tests/harness_test.sh)
#   cli       tessgen's options and exit codes
#   spec      every bad spec in tests/specs/bad is refused with its message, nothing written
#   golden    emitted text of tests/specs/golden.lua equals tests/golden/ (TESS_UPDATE_GOLDEN=1 rewrites)
#   inspect   --show/--blocks/--summary text, schedule.json vs the DESIGN.md formula, schedule.html in
#             headless Chromium, --trace and --stats of a run (tests/inspect.sh)
#   e2e       the generated programs for a matrix of meshes against the float64 numpy
#             reference (tests/ref/tessref.py), outputs poisoned first, bytes checked against the plan
#   megatron  the Megatron-LM 1-D scheme on p = 1..4: output, gradients, replicas, losses against the
#             Tesseract meshes and the float64 reference, bytes against the docs/MEGATRON.md formula
#   lm        the whole GPT-2 (model.vocab: embedding, ln_f, tied head, vocab-parallel loss; tests/lm.sh) on five
#             meshes against the float64 reference: logits, loss, every gradient, replicas, 20-step losses, the
#             docs/MODEL.md byte formula, bad token files
#   generate  mode = "generate": greedy and sampled ids and logits of the prefill and KV-cache decode programs against
#             the float64 reference on [1,1,1], [2,2,1], [2,2,2], sampling by chi-square, bad prompts and options (tests/generate.sh, docs/GENERATE.md)
#   bf16      dtype = "bf16" (tests/bf16_compute.sh, docs/BF16.md) on the e2e mesh matrix against tessref --bf16 and
#             float64: forward, gradients, replicas, bytes half of fp32's broadcasts, 20-step losses, the whole
#             GPT-2 and megatron; BF16 weight files (tests/bf16.sh); `cuda: bf16` under the emulation
#   hf        Hugging Face in (tests/hf.sh): tessgen --from-hf on a save_pretrained directory written by
#             the reference, run on two meshes against it; every refused config value; mixed weight names
#             (tests/hf_io.sh) sharded checkpoints in, --hf-out, and transformers itself when importable
#   files     bad weights/input files and a wrong world size are refused with clear messages
#   asan      one generated program built and run under ASan+UBSan
#   slurm     bin/model before stub rank programs (no Slurm): the BLAS threads and yield it sets, the order of the
#             rank variables, a bad one refused; then a single-node Slurm the test starts itself (as root; it
#             installs slurmctld slurmd munge with scripts/deps.sh --slurm): the forward and 2 training steps under
#             srun --mpi=pmix bitwise equal to mpirun, an sbatch job, a wrong task count (tests/slurm.sh)
#   cuda      the CUDA backend without a GPU (and one megatron spec, one model.vocab spec): golden text, backend choice,
#             the generated CUDA rank code run on the CPU under an emulation of its two streams (the vocab spec
#             against the CPU program: `cuda: lm`), and (with nvcc) every .cu
#             compiled for sm_80 and sm_90 with warnings as errors and no register spills
#   gpu       the GPU check without a GPU (tests/gpu.sh): build settings (pip's NCCL layout, -Werror off), the
#             carry (tests/gpu/prepare.sh), its rehearsal with the system's Open MPI and Lua hidden, the check
#             flows on the CPU emulation, the benchmark report
#   fuzz      each libFuzzer harness (tests/fuzz) for a few seconds under ASan+UBSan (tests/fuzz.sh)
#   data      scripts/mkshard.py rewrites the shipped corpus data/tiny byte for byte; scripts/tokens.py and
#             mkshard.py --tokenizer against a BPE worked out by hand (tests/data.sh)
#   docs      every link of README.md and docs/ resolves inside the repository, no internal issue numbers,
#             README starts with its status table (tests/docs.sh, tools/doccheck.py)
# and ends with "N passed, N failed, N skipped" (a check that cannot run here, e.g. without nvcc,
# prints "ok - ... # skip <why>" and counts as skipped, not passed: every group reports through tests/harness.sh's
# ok/notok/check, never setting a count itself; tests/harness_test.sh, a unit check, holds them to it). Exit status
# non-zero if anything failed.
# TESS_TEST_FILTER=REGEX runs only the checks whose names match; TESS_TEST_GROUPS="e2e lm" only those files of tests/
# (after the unit checks). A result 10 s or more after the previous one comes after a "#   Ns since ..." line.
# Some groups run beside the others, on the second core (lane 2, below; their output printed in its place in the list,
# or later); TESS_TEST_SERIAL=1 runs every group in one shell, in order. TESS_TEST_JOBS=N: the compiles a check runs
# side by side itself (tests/cuda/emu_build.sh, the CUDA emulation's programs) at most N at once (default: the cores).
set -u
cd "$(dirname "$0")/.."
ROOT=$(pwd)
export ROOT
scripts/deps.sh || { echo "0 passed, 1 failed"; exit 1; }
PY=$(scripts/python.sh) || { echo "0 passed, 1 failed"; exit 1; }
export OMPI_MCA_rmaps_base_oversubscribe=1
# tessgen's default backends depend on the machine (cuda when nvcc is found): the suite fixes them to the
# CPU, so every output is the same everywhere; tests/cuda.sh asks for the CUDA backend explicitly
export TESS_BACKENDS=cpu
unset TESS_CUDA_ARCH TESS_MPICC TESS_CUDA_CCBIN TESS_MPI_CFLAGS TESS_MPI_LIBS TESS_NCCL_HOME TESS_CUDA_LDFLAGS TESS_WERROR
if ! ninja >/tmp/tessgen-build.log 2>&1; then
    cat /tmp/tessgen-build.log
    echo "0 passed, 1 failed"
    exit 1
fi
WORK=$(mktemp -d /tmp/tessgen-tests.XXXXXX)
trap '[ -z "${lane2_pid:-}" ] || kill "$lane2_pid" 2>/dev/null; rm -rf "$WORK"' EXIT
t0=$(date +%s)
# ok, notok, check, unit, wanted and the counters pass, fail and skip
# shellcheck source=tests/harness.sh
. tests/harness.sh

# cuDNN's attention object (scripts/sdpa_build.sh: over a minute of one core) is compiled in the background, niced,
# while the first groups run, when the cuda group will ask for it: that group's checks then find it built (the script
# holds a lock, so their ninja waits for it rather than compiling it twice). Nothing is lost if it fails: the cuda
# group's own build says why.
case " ${TESS_TEST_GROUPS:-cuda} " in
*" cuda "*)
    if command -v "${TESS_NVCC:-nvcc}" >/dev/null 2>&1 && [ ! -f build/cuda/trc_sdpa.o ]; then
        (nice -n 10 scripts/sdpa_build.sh build/cuda/trc_sdpa.o >/dev/null 2>&1 &)
    fi
    ;;
esac

# the groups, in this order (TESS_TEST_GROUPS picks some)
GROUP_LIST=${TESS_TEST_GROUPS:-cli spec_errors advise golden inspect e2e megatron lm generate megatron_lm bf16_compute hf \
    hf_io slurm cuda gpu fuzz data docs}

# the optional test tools their groups install as root (scripts/deps.sh --test-extras: chromium, for inspect's
# schedule.html checks; --slurm: Slurm's daemons and munge, for tests/slurm.sh) are installed in the background from
# here on, when those checks will run and the tools are missing: on a fresh machine that is most of a minute of
# downloading and unpacking the groups no longer wait for. A group's own scripts/deps.sh call waits for the lock this
# one holds, then finds the packages installed (or fails as it would have, and the group says why).
if [ "$(id -u)" = 0 ]; then
    extras=""
    case " $GROUP_LIST " in *" inspect "*) wanted "inspect: html" && ! command -v chromium >/dev/null 2>&1 &&
        ! command -v chromium-browser >/dev/null 2>&1 && ! command -v google-chrome >/dev/null 2>&1 &&
        extras="--test-extras" ;; esac
    case " $GROUP_LIST " in *" slurm "*) wanted "slurm" && extras="$extras --slurm" ;; esac
    [ -z "$extras" ] || (for x in $extras; do scripts/deps.sh "$x"; done >/dev/null 2>&1 &)
fi

# ---- lane 2: groups beside the others -----------------------------------------------------------------------
# The suite's checks mostly keep one core busy (a tessgen run, a compile, a python comparison), and CI has two: the
# groups of TESS_TEST_LANE2 run in a second shell, from here on, beside the unit checks and the other groups. By
# default they are generate, bf16_compute, hf_io, cuda and gpu (about half of the suite's time; they install no
# package, read no other group's files and no group reads theirs). Each works in its own folder ($WORK/lane2/work),
# one after another in the list's order; its output is held in $WORK/lane2/GROUP.out and printed, its counts added,
# when the first shell has come to it in the list and lane 2 has finished it (else after the next group there, or
# at the end). TESS_TEST_SERIAL=1 (or TESS_TEST_LANE2="") runs every group in this shell, in order.
lane2_groups="" lane1_count=0
for group in $GROUP_LIST; do
    case " ${TESS_TEST_LANE2-generate bf16_compute hf_io cuda gpu} " in
    *" $group "*) lane2_groups="$lane2_groups $group" ;;
    *) lane1_count=$((lane1_count + 1)) ;;
    esac
done
# nothing to overlap with: every group here, in order
{ [ "$lane1_count" -gt 0 ] && [ "${TESS_TEST_SERIAL:-0}" != 1 ]; } || lane2_groups=""
LANE2=$WORK/lane2
lane2_pid=""
lane2() { # the groups of lane 2, one after another; GROUP.done holds the group's seconds and pass, fail, skip counts
    WORK=$LANE2/work
    mkdir -p "$WORK"
    # the CUDA emulation's runtime (tests/cuda/emu_build.sh asks ninja for it; so does tests/ckpt.sh, in the first
    # shell): built here first, so that two ninja runs in this checkout do not build it at once
    case " $lane2_groups " in *" cuda "* | *" gpu "*) ninja build/emu/emu.o >"$LANE2/emu.log" 2>&1 ;; esac
    local g0
    for group in $lane2_groups; do
        pass=0 fail=0 skip=0 last_result=$SECONDS g0=$(date +%s)
        # shellcheck source=/dev/null
        . "tests/$group.sh" >"$LANE2/$group.out" 2>&1
        echo "$(($(date +%s) - g0)) $pass $fail $skip" >"$LANE2/$group.done"
    done
}
if [ -n "$lane2_groups" ]; then
    mkdir -p "$LANE2"
    lane2 </dev/null &
    lane2_pid=$!
fi
lane2_pending="" # lane 2's groups the list has come to, not printed yet, in the list's order
# lane2_flush [wait]: print the pending groups lane 2 has finished, in order, up to the first it has not (with wait:
# all of them, waiting for each): each one's output, then its counts added
lane2_flush() {
    local g secs p f s rest=""
    for g in $lane2_pending; do
        if [ -z "$rest" ] && [ "${1:-}" = wait ]; then
            while [ ! -e "$LANE2/$g.done" ] && kill -0 "$lane2_pid" 2>/dev/null; do sleep 1; done
        fi
        if [ -n "$rest" ] || { [ ! -e "$LANE2/$g.done" ] && [ "${1:-}" != wait ]; }; then
            rest="$rest $g"
            continue
        fi
        cat "$LANE2/$g.out" 2>/dev/null
        if read -r secs p f s <"$LANE2/$g.done" 2>/dev/null; then
            pass=$((pass + p)) fail=$((fail + f)) skip=$((skip + s))
            times="$times, $g ${secs}s"
        else
            notok "$g: lane 2 stopped before the group finished"
        fi
    done
    lane2_pending=$rest
}

# ---- unit --------------------------------------------------------------------------
for t in test_mesh test_spec test_pipe test_machine test_plan test_streams test_place test_cost test_io test_data test_bf16k test_cpuk; do
    unit build/tests/$t "$t"
    ASAN_OPTIONS=detect_leaks=1 unit build/asan/tests/$t "$t (asan)"
done
# tr_bcast_bf16 needs several ranks (the other bf16 cases run in the loop above)
mpirun_flags="--oversubscribe --bind-to none"
[ "$(id -u)" = 0 ] && mpirun_flags="$mpirun_flags --allow-run-as-root"
# shellcheck disable=SC2086
check "unit test_bf16k: tr_bcast_bf16 over 3 ranks" mpirun $mpirun_flags -np 3 build/tests/test_bf16k --bcast
# the runtime is built with -fno-math-errno: the kernels' sqrtf is one instruction, not a call that may set errno
# (which keeps a loop from vectorising); the loss's exponentials are tr_vexpf, no libm call at all
unit_no_errno_math() {
    local o bad=0
    for o in build/rt/tr_kernels.o build/rt/tr_kernels_bwd.o build/rt/tr_kernels_lm.o; do
        if nm "$o" | grep -Ew 'U (sqrtf|sqrt)'; then echo "$o calls libm's sqrt"; bad=1; fi
    done
    if nm build/rt/tr_kernels_lm.o | grep -Ew 'U (expf|exp)'; then echo "the loss calls libm's exp"; bad=1; fi
    return $bad
}
check "unit: the runtime's kernels call no errno-setting sqrtf, the loss no libm exp" unit_no_errno_math
# the planner's files call one way: plan.c -> scheme planners -> shared steps -> builder (docs/ARCHITECTURE.md,
# "The planner's layers"); the checker is first shown to find a cycle, one through a function pointer included
check "unit: tools/plandeps.py finds planner files that call each other in a cycle, and passes one-way calls" \
    python3 tools/plandeps.py --self-test
check "unit: the planner's files (gen/plan*.c) call each other one way, no cycle" python3 tools/plandeps.py
# the counting itself: tests/harness.sh's functions on passes, failures and skips, a group's skip line (tests/cuda.sh's
# with nvcc hidden) counted as a skip and not a pass, no group setting a counter itself
check "unit: tests/harness.sh counts a pass, a failure and a skip once each, tests/cuda.sh's skip lines as skips; no file of tests/ sets a counter" \
    tests/harness_test.sh

# ---- the groups, each a file sourced into this shell (its checks share ok/notok/check), timed -----------------
times="unit $(($(date +%s) - t0))s"
for group in $GROUP_LIST; do
    case " $lane2_groups " in *" $group "*) lane2_pending="$lane2_pending $group"; lane2_flush; continue ;; esac
    g0=$(date +%s)
    # shellcheck source=/dev/null
    . "tests/$group.sh"
    times="$times, $group $(($(date +%s) - g0))s"
    lane2_flush
done
lane2_flush wait
[ -z "$lane2_pid" ] || wait "$lane2_pid"
dt=$(( $(date +%s) - t0 ))
echo "# seconds per file of tests/: $times${lane2_groups:+ (lane 2, beside the others:$lane2_groups)}"
echo "suite took ${dt}s"
echo "$pass passed, $fail failed, $skip skipped"
[ $fail -eq 0 ]
