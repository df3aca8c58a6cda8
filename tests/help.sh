# tests/help.sh - sourced by tests/lm.sh, on its programs and tests/e2e.sh's and tests/train.sh's (each check builds the
# program it asks when a filter left it unbuilt, so it also runs alone):
# every generated program's --help is written for what the program is (a block stack on hidden states or
# the whole GPT-2 on token ids; inference or training), every option it lists is one its parser takes, and
# a mistyped option gets "did you mean" and no launcher banner.

# help_is DIR KIND: KIND is block-infer, block-train, lm-infer or lm-train
help_is() {
    local dir=$1 kind=$2 h="$WORK/help.$2"
    "$dir/run" --help >"$h" 2>&1 || { cat "$h"; echo "--help exited non-zero"; return 1; }
    cat "$h"
    head -1 "$h" | grep -q "^usage: " || { echo "no usage line"; return 1; }
    local want=() never=()
    case $kind in
    block-*) want+=("a stack of" "--input F" "[batch=" "hidden=") never+=(--tokens --targets --logits-out "--data P" --hf-out
        "the whole GPT-2" "cross-entropy") ;;
    lm-*) want+=("the whole GPT-2" "--tokens F" "--targets F" "--logits-out F" "--hf-out DIR" "ln_f")
        never+=("--input" "--target F" "--dy" "--dx-out" "mean((y - target)^2)" "not used" "--generate" "--max-new") ;;
    esac
    case $kind in
    *-train) want+=("--steps N" "--checkpoint-out" "--resume" "training (AdamW") ;;
    *-infer) want+=("inference") never+=(--steps --resume --checkpoint-out --replica-check --grads-out --timing) ;;
    esac
    case $kind in
    lm-train) want+=("cross-entropy" "--data P") ;;
    block-train) want+=("mean((y - target)^2)" "--dy F" "--target F") ;;
    esac
    local s
    for s in "${want[@]}"; do grep -qF -- "$s" "$h" || { echo "help lacks: $s"; return 1; }; done
    for s in "${never[@]}"; do ! grep -qF -- "$s" "$h" || { echo "help of a $kind program shows: $s"; return 1; }; done
    # every listed option is one this program's parser knows: OPT [VALUE] --help prints the help again
    local opt val
    while read -r opt val; do
        case $val in [A-Z]*) val=x ;; *) val= ;; esac
        "$dir/run" "$opt" ${val:+"$val"} --help >"$WORK/help.opt" 2>&1 ||
            { cat "$WORK/help.opt"; echo "$opt is listed but not taken"; return 1; }
    done < <(grep -oE '^  --[a-z-]+( [A-Z]+)?' "$h" | sed 's/^  //')
}

# --timing alone: exit 2 with the rule, nothing run
help_timing_alone() {
    "$1/run" --timing --seed 3 >"$WORK/timing.out" 2>&1
    local rc=$?
    cat "$WORK/timing.out"
    [ $rc -eq 2 ] && grep -qF -- "--timing times --steps N" "$WORK/timing.out" &&
        [ "$(wc -l <"$WORK/timing.out")" -eq 1 ]
}

# a mistyped option: one line naming it and the option meant, exit 2, no banner of the launcher
help_typo() {
    local dir=$1
    "$dir/run" --step 5 >"$WORK/typo.out" 2>&1
    local rc=$?
    cat "$WORK/typo.out"
    [ $rc -eq 2 ] || { echo "exit $rc, want 2"; return 1; }
    grep -qF -- "unknown option --step; did you mean --steps?" "$WORK/typo.out" || { echo "no suggestion"; return 1; }
    grep -qF -- "--checkpoint-evry" <<<"$("$dir/run" --checkpoint-evry 5 2>&1)" || return 1
    "$dir/run" --checkpoint-evry 5 2>&1 | grep -qF "did you mean --checkpoint-every?" || { echo "no suggestion"; return 1; }
    ! grep -qiE "primary job|mpirun detected|-----" "$WORK/typo.out" || { echo "the launcher's banner is shown"; return 1; }
    [ "$(wc -l <"$WORK/typo.out")" -eq 1 ] || { echo "more than one line"; return 1; }
}

# help_block MODE KIND: help_is on a block stack's program of mesh [2,2,2]: tests/e2e.sh's (inference) or
# tests/train.sh's (training) when those groups built it, else one built here from their spec (a filter, or
# TESS_TEST_GROUPS=lm), once
help_block() {
    local dir="$WORK/e2e_2_2" head='name = "e2e_q2_d2",' opt=""
    [ "$1" = train ] && dir="$WORK/train_2_2" head='name = "train_q2_d2", mode = "train",' \
        opt="optimizer = { lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.01 },"
    if [ ! -x "$dir/bin/model" ]; then
        dir="$WORK/help_progs/$1_2_2"
        [ -x "$dir/bin/model" ] || {
            mkdir -p "$WORK/help_progs" && cat >"$dir.lua" <<SPEC &&
return {
  $head
  mesh = { q = 2, d = 2 },
  model = { layers = 2, hidden = 48, heads = 12, ffn = 192, seq = 8, batch = 12, eps = 1e-5 },
  $opt
}
SPEC
                bin/tessgen "$dir.lua" -o "$dir" --quiet && ninja -C "$dir" >/dev/null
        } || return 1
    fi
    help_is "$dir" "$2"
}

check "help: a block stack's inference program describes itself" help_block infer block-infer
check "help: a block stack's training program describes itself" help_block train block-train
# help_lm_infer: tests/lm.sh's inference program of [2,2,1] (lm_infer's), built first if the filter skipped that check
help_lm_infer() { lm_prog infer 2 1 && help_is "$WORK/lm/infer_2_1" lm-infer; }
check "help: the whole GPT-2's inference program describes itself" help_lm_infer
# help_lm CMD...: CMD on tests/lm.sh's training program of [2,2,1], built first if the filter skipped its mesh
help_lm() { lm_train 2 1 && "$@"; }
lm_mesh_ok 2 1 && check "help: the whole GPT-2's training program describes itself" \
    help_lm help_is "$WORK/lm/train_2_1" lm-train
lm_mesh_ok 2 1 && check "help: a mistyped run option gets 'did you mean', one line, exit 2" \
    help_lm help_typo "$WORK/lm/train_2_1"
lm_mesh_ok 2 1 && check "help: --timing without --steps or --generate (it timed nothing) is refused, one line, exit 2" \
    help_lm help_timing_alone "$WORK/lm/train_2_1"
