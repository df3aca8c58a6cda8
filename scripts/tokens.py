#!/usr/bin/env python3
"""tokens.py - text to token ids and back, for `run --generate` (docs/GENERATE.md "Text in and out").

  scripts/tokens.py encode MODEL_DIR -o P.npy --text "Once upon a time" --text "The"
  scripts/tokens.py encode MODEL_DIR -o P.npy --lines prompts.txt        (one prompt a line)
  scripts/tokens.py encode MODEL_DIR -o P.npy story.txt notes.txt         (one prompt a file)
  scripts/tokens.py decode MODEL_DIR T.npy [--json]
  run ... --generate --stream | scripts/tokens.py stream MODEL_DIR [--prompt P.npy]

MODEL_DIR is the Hugging Face directory the weights came from (its tokenizer.json, or vocab.json and merges.txt;
scripts/tokenizer.py). encode writes the prompts as run --prompt-tokens reads them: int32 [n, L], each row one
prompt's ids left-aligned and -1 after them, L the longest prompt; the prompts in the order given (--text, then
--lines, then files). decode prints each row of run --output's T.npy (or of a P.npy) as text: the ids up to the
first -1, one row after another, each followed by a newline; --json prints one JSON list of the rows' strings
instead (exact, for scripts). The .npy file is written under a temporary name and renamed into place. stream reads
run --stream's lines ("tokens M ID ...": decode step M's new id of each sequence, -1 once it has ended) from standard
input as they come and prints the text: one sequence's as a running text (after its prompt's, with --prompt),
several as "[b] text" lines, each when it has new text (a newline in the text written \n); a token that ends inside
a UTF-8 character is held until the character is whole. The run's other lines go to standard error.

Refused, exit 2, nothing written: no prompt, a prompt of no tokens (an empty line of --lines is skipped, an empty
--text or file is refused), a file that cannot be read or is not UTF-8; decode of a file that is not an int32
2-D .npy or whose ids lie outside the tokenizer's vocabulary. Exit 1: the tokenizer cannot be had or read.
"""
import argparse
import ast
import json
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tokenizer as tokz  # noqa: E402


def fail(msg):
    print(f"tokens.py: {msg}", file=sys.stderr)
    sys.exit(2)


def read_bytes(path):
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        fail(f"{path}: {e.strerror}")


def read_text(path):
    data = read_bytes(path)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        fail(f"{path}: not UTF-8 text (byte {e.start}): convert it to UTF-8")


def save_npy(path, rows, width):
    """rows (lists of ints) as an int32 [len(rows), width] .npy (format 1.0, C order), -1 after each row's ids;
    written under a temporary name and renamed into place. The standard library only: any python3 runs this."""
    header = "{'descr': '<i4', 'fortran_order': False, 'shape': (%d, %d), }" % (len(rows), width)
    header += " " * (63 - (10 + len(header)) % 64) + "\n"  # the whole preamble a multiple of 64 bytes
    body = b"".join(struct.pack(f"<{width}i", *(r + [-1] * (width - len(r)))) for r in rows)
    tmp = f"{path}.tmp.{os.getpid()}"
    try:
        with open(tmp, "wb") as f:
            f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode("latin1") + body)
        os.replace(tmp, path)
    except OSError as e:
        if os.path.exists(tmp):
            os.remove(tmp)
        fail(f"{path}: {e.strerror}")


def load_npy(path):
    """An int32 2-D .npy (C order) as a list of rows; refused (exit 2) otherwise."""
    data = read_bytes(path)
    if data[:6] != b"\x93NUMPY" or len(data) < 10 or data[6] not in (1, 2, 3):
        fail(f"{path}: not a .npy file: want int32 [n, L] (run --output's T.npy, or a P.npy)")
    hl, at = (struct.unpack("<H", data[8:10])[0], 10) if data[6] == 1 else (struct.unpack("<I", data[8:12])[0], 12)
    try:
        h = ast.literal_eval(data[at: at + hl].decode("latin1"))
        descr, fortran, shape = h["descr"], h["fortran_order"], tuple(h["shape"])
    except (ValueError, SyntaxError, KeyError, TypeError):
        fail(f"{path}: its .npy header cannot be read")
    names = {"<f4": "float32", "<f8": "float64", "<i8": "int64", "<i2": "int16", "|u1": "uint8", "<u2": "uint16"}
    if descr not in ("<i4", "|i4") or fortran or len(shape) != 2:
        fail(f"{path}: {names.get(descr, descr)}{' (Fortran order)' if fortran else ''} with shape {shape}: want "
             f"int32 [n, L] in C order (run --output's T.npy, or a P.npy)")
    n, width = shape
    body = data[at + hl:]
    if len(body) != 4 * n * width:
        fail(f"{path}: {len(body)} bytes of data for shape {shape}: the file is cut short or padded")
    vals = struct.unpack(f"<{n * width}i", body)
    return [list(vals[i * width: (i + 1) * width]) for i in range(n)]


def encode(a, tk):
    prompts = [("--text " + repr(t), t) for t in a.text]
    if a.lines:
        for k, line in enumerate(read_text(a.lines).splitlines()):
            if line.strip():
                prompts.append((f"{a.lines} line {k + 1}", line))
    prompts += [(p, read_text(p)) for p in a.files]
    if not prompts:
        fail("no prompt: give --text TEXT, --lines FILE or text files")
    rows = []
    for where, text in prompts:
        ids = tk.encode(text).ids
        if not ids:
            fail(f"{where}: the prompt has no tokens: a prompt needs at least one")
        rows.append(ids)
    width = max(len(r) for r in rows)
    save_npy(a.out, rows, width)
    print(f"{a.out}: {len(rows)} prompts, int32 [{len(rows)}, {width}], lengths "
          f"{', '.join(str(len(r)) for r in rows)}", file=sys.stderr)


def decode(a, tk):
    vocab = tk.get_vocab_size()
    texts = []
    for i, row in enumerate(load_npy(a.ids)):
        ids = row[: row.index(-1)] if -1 in row else row
        bad = [x for x in ids if not 0 <= x < vocab]
        if bad:
            fail(f"{a.ids}: row {i} holds id {bad[0]}, outside the tokenizer's vocabulary [0, {vocab}): "
                 f"was the model's vocab larger than its tokenizer's?")
        texts.append(tk.decode(ids, skip_special_tokens=False))
    if a.json:
        print(json.dumps(texts, ensure_ascii=False))
    else:
        for s in texts:
            print(s)


def stream(a, tk):
    prompts = load_npy(a.prompt) if a.prompt else None
    seqs = None  # per sequence: its ids (prompt first), the length of its text already printed, ended
    for line in sys.stdin:
        f = line.split()
        if len(f) < 2 or f[0] != "tokens":
            sys.stderr.write(line)
            continue
        try:
            ids = [int(x) for x in f[2:]]
        except ValueError:
            fail(f"standard input: not a line of run --stream: {line.strip()!r}")
        if seqs is None:
            if prompts is not None and len(prompts) != len(ids):
                fail(f"--prompt {a.prompt} has {len(prompts)} prompts, the run {len(ids)} sequences")
            seqs = []
            for b in range(len(ids)):
                p = [x for x in prompts[b] if x >= 0] if prompts is not None else []
                text = tk.decode(p, skip_special_tokens=False) if p else ""
                seqs.append([p, 0, False])
                if len(ids) == 1 and text:
                    sys.stdout.write(text)
                    seqs[b][1] = len(text)
                elif text:
                    seqs[b][1] = len(text)
                    print(f"[{b}] {text}".replace("\n", "\\n"))
        for b, x in enumerate(ids[: len(seqs)]):
            if x < 0 or seqs[b][2]:
                seqs[b][2] = True
                continue
            seqs[b][0].append(x)
            text = tk.decode(seqs[b][0], skip_special_tokens=False)
            if text.endswith("\ufffd"):
                continue  # inside a UTF-8 character: wait for its other bytes
            new, seqs[b][1] = text[seqs[b][1]:], len(text)
            if len(seqs) == 1:
                sys.stdout.write(new)
            elif new:
                print(f"[{b}] " + new.replace("\n", "\\n"))
        sys.stdout.flush()
    for b, sq in enumerate(seqs or []):  # what a cut character held back
        rest = tk.decode(sq[0], skip_special_tokens=False)[sq[1]:]
        if rest:
            sys.stdout.write(rest if len(seqs) == 1 else f"[{b}] " + rest.replace("\n", "\\n") + "\n")
    if seqs is not None and len(seqs) == 1:
        sys.stdout.write("\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("encode", help="prompts (text) to a P.npy of token ids")
    e.add_argument("model_dir", help="the Hugging Face model directory (its tokenizer files)")
    e.add_argument("files", nargs="*", help="text files, one prompt each")
    e.add_argument("--text", action="append", default=[], help="a prompt (repeat for more)")
    e.add_argument("--lines", help="a text file of prompts, one a line (empty lines skipped)")
    e.add_argument("-o", "--out", required=True, help="the int32 [n, L] .npy to write")
    d = sub.add_parser("decode", help="a T.npy of token ids to text")
    d.add_argument("model_dir", help="the Hugging Face model directory (its tokenizer files)")
    d.add_argument("ids", help="run --output's T.npy (or a P.npy)")
    d.add_argument("--json", action="store_true", help="print one JSON list of the rows' strings")
    st = sub.add_parser("stream", help="run --stream's lines on standard input to text as it comes")
    st.add_argument("model_dir", help="the Hugging Face model directory (its tokenizer files)")
    st.add_argument("--prompt", help="the P.npy of the run: each sequence's text starts with its prompt's")
    a = ap.parse_args()
    try:
        tk = tokz.load(a.model_dir)
    except tokz.TokenizerError as err:
        print(f"tokens.py: {err}", file=sys.stderr)
        sys.exit(1)
    {"encode": encode, "decode": decode, "stream": stream}[a.cmd](a, tk)


if __name__ == "__main__":
    main()
