"""tokenizer.py - the GPT-2 tokenizer of a Hugging Face model directory, for scripts/tokens.py and scripts/mkshard.py.

A directory that save_pretrained wrote (or one that `run --hf-out` wrote from it) holds the tokenizer as
tokenizer.json (the fast tokenizer's one file) or as vocab.json + merges.txt (GPT-2's byte-level BPE); load()
reads the first it finds, in that order, with Hugging Face's `tokenizers` library: tokenizer.json as it is; the
pair as a byte-level BPE with GPT-2's pre-tokenizer (its regex, no prefix space) and byte-level decoder, which is
what GPT2TokenizerFast builds from the same two files (<|endoftext|>, when the vocabulary has it, a special token). Nothing is downloaded from a model hub: the files are the
directory's.

`tokenizers` comes from PyPI (Debian has no package of it): when the running python cannot import it, the pinned
wheel is installed once with pip --target into build/py/tokenizers of this checkout (ignored by git; nothing
outside the checkout is touched), as scripts/sass_tools.sh does for its tools; without network or pip the error
says what to install.
"""
import os
import subprocess
import sys

VERSION = "0.23.3"  # the wheel these scripts were written and checked against
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET = os.path.join(ROOT, "build", "py", "tokenizers")
EOT = "<|endoftext|>"  # GPT-2's end of text


class TokenizerError(Exception):
    """A tokenizer that cannot be had or read: the message names the file and the fix."""


def _import():
    try:
        import tokenizers  # noqa: F401
        return tokenizers
    except ImportError:
        pass
    if not os.path.isdir(os.path.join(TARGET, "tokenizers")):
        tmp = f"{TARGET}.tmp.{os.getpid()}"
        print(f"tokenizer.py: installing tokenizers=={VERSION} from PyPI into {TARGET} (once)", file=sys.stderr)
        r = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                            "--no-deps", "--target", tmp, f"tokenizers=={VERSION}"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if r.returncode != 0:
            subprocess.run(["rm", "-rf", tmp])
            raise TokenizerError(f"cannot import tokenizers, and pip could not install tokenizers=={VERSION} into "
                                 f"{TARGET}: {r.stdout.strip().splitlines()[-1] if r.stdout.strip() else 'no output'}"
                                 f"; install it yourself (pip install tokenizers=={VERSION}) and rerun")
        subprocess.run(["rm", "-rf", TARGET])
        os.replace(tmp, TARGET)  # complete or absent: a run cut short leaves only the .tmp folder
    sys.path.insert(0, TARGET)
    import tokenizers
    return tokenizers


def load(directory):
    """The tokenizer of a model directory (see the top of this file)."""
    if not os.path.isdir(directory):
        raise TokenizerError(f"{directory}: not a directory: name the model directory that holds tokenizer.json, "
                             f"or vocab.json and merges.txt")
    tj = os.path.join(directory, "tokenizer.json")
    vocab, merges = os.path.join(directory, "vocab.json"), os.path.join(directory, "merges.txt")
    if not os.path.isfile(tj) and not (os.path.isfile(vocab) and os.path.isfile(merges)):
        have = ", ".join(sorted(os.listdir(directory))) or "nothing"
        raise TokenizerError(f"{directory}: no tokenizer.json and no vocab.json + merges.txt (it holds {have}): "
                             f"name the directory save_pretrained wrote the tokenizer into")
    tk = _import()
    try:
        if os.path.isfile(tj):
            return tk.Tokenizer.from_file(tj)
        model = tk.models.BPE.from_file(vocab, merges)
        t = tk.Tokenizer(model)
        t.pre_tokenizer = tk.pre_tokenizers.ByteLevel(add_prefix_space=False)
        t.decoder = tk.decoders.ByteLevel()
        if t.token_to_id(EOT) is not None:  # GPT2TokenizerFast's bos/eos/unk: one id, never split
            t.add_special_tokens([EOT])
        return t
    except Exception as e:  # the library's own parse errors: name the files
        raise TokenizerError(f"{directory}: cannot read the tokenizer ({tj if os.path.isfile(tj) else vocab + ', ' + merges}): {e}")
