#!/usr/bin/env python3
"""mkshard.py - write token shards in llm.c's .bin format from text files.

By default every byte of the texts is one token (vocab 256, no tokenizer), the
texts concatenated in the order given (no separator is added). With
--tokenizer MODEL_DIR the texts are tokenized by that Hugging Face directory's
GPT-2 tokenizer (scripts/tokenizer.py: its tokenizer.json, or vocab.json and
merges.txt), each file a document preceded by <|endoftext|> when the
vocabulary has it (as llm.c's data scripts write GPT-2 shards); ids above
65535 do not fit the format and are refused. The tokens are either written as
one shard (-o OUT) or split into a training and a validation shard (--train,
--val): the last floor(N * val_fraction) tokens go to the validation shard.

The .bin format (llm.c, read by runtime/tr_data.c): a header of 256 int32
little-endian, [0] magic 20240520, [1] version 1, [2] the number of tokens N,
the other 253 zero; then N uint16 little-endian tokens. The output depends on
nothing but the bytes of the texts and the arguments, so the same command
rewrites the same files byte for byte. Each file is written to a temporary
name and renamed into place.

Examples:
  scripts/mkshard.py -o corpus.bin notes.txt more.txt
  scripts/mkshard.py --train data/tiny/train.bin --val data/tiny/val.bin \\
      --val-fraction 0.1 --sources data/tiny/SOURCES      (how data/tiny was made)
Python 3 standard library only (and, with --tokenizer, the `tokenizers` wheel that
scripts/tokenizer.py installs into build/py when it is missing).
"""
import argparse
import os
import struct
import sys

MAGIC = 20240520
VERSION = 1
MAX_TOKENS = 2**31 - 1  # the header's count is an int32


def write_shard(path, tokens):
    """tokens: bytes (each byte one token) or a list of ids below 65536; written atomically in the .bin format."""
    if len(tokens) > MAX_TOKENS:
        sys.exit(f"mkshard.py: {path}: {len(tokens)} tokens, more than a .bin shard holds ({MAX_TOKENS}): split the text")
    header = struct.pack("<256i", MAGIC, VERSION, len(tokens), *([0] * 253))
    body = struct.pack(f"<{len(tokens)}H", *tokens)
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "wb") as f:
        f.write(header)
        f.write(body)
    os.replace(tmp, path)
    print(f"{path}: {len(tokens)} tokens, {len(header) + len(body)} bytes")


def read_sources(listfile):
    """The texts a SOURCES file names, one a line, relative to its directory; '#' lines and blank lines skipped."""
    base = os.path.dirname(listfile)
    with open(listfile, encoding="utf-8") as f:
        return [os.path.join(base, line.strip()) for line in f if line.strip() and not line.startswith("#")]


def tokenize(model_dir, files, texts):
    """The ids of the texts by model_dir's tokenizer: per file, <|endoftext|> (when the vocabulary has it) then the
    text's ids. Exits naming the file on text that is not UTF-8 or an id that does not fit 16 bits."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import tokenizer as tokz
    try:
        tk = tokz.load(model_dir)
    except tokz.TokenizerError as e:
        sys.exit(f"mkshard.py: {e}")
    eot = tk.token_to_id(tokz.EOT)
    ids = []
    for p, raw in zip(files, texts):
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            sys.exit(f"mkshard.py: {p}: not UTF-8 text (byte {e.start}): convert it, or leave out --tokenizer")
        doc = ([eot] if eot is not None else []) + tk.encode(text).ids
        big = [x for x in doc if x > 65535]
        if big:
            sys.exit(f"mkshard.py: {p}: id {big[0]} of {model_dir}'s tokenizer does not fit the .bin format's uint16")
        ids += doc
    return ids


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("texts", nargs="*", help="text files, concatenated in this order (after those of --sources)")
    ap.add_argument("--sources", help="a file listing text files, one a line, relative to its own directory")
    ap.add_argument("-o", "--out", help="write all tokens to this one shard")
    ap.add_argument("--train", help="the training shard (with --val)")
    ap.add_argument("--val", help="the validation shard: the last part of the tokens (with --train)")
    ap.add_argument("--val-fraction", type=float, default=0.1,
                    help="share of the tokens for --val, 0 < f < 1 (default 0.1)")
    ap.add_argument("--tokenizer", metavar="MODEL_DIR",
                    help="tokenize with this Hugging Face directory's GPT-2 tokenizer instead of one token a byte")
    a = ap.parse_args()

    files = (read_sources(a.sources) if a.sources else []) + a.texts
    if not files:
        ap.error("no text files: name them, or a --sources list")
    if bool(a.out) == bool(a.train or a.val) or bool(a.train) != bool(a.val):
        ap.error("give either -o OUT, or both --train and --val")
    if not 0.0 < a.val_fraction < 1.0:
        ap.error(f"--val-fraction {a.val_fraction} is outside (0, 1)")
    data = b""
    texts = []
    for p in files:
        try:
            with open(p, "rb") as f:
                texts.append(f.read())
        except OSError as e:
            sys.exit(f"mkshard.py: {p}: {e.strerror}")
    if a.tokenizer:
        data = tokenize(a.tokenizer, files, texts)
    else:
        data = b"".join(texts)
    if a.out:
        write_shard(a.out, data)
        return
    nval = int(len(data) * a.val_fraction)
    if nval < 2 or len(data) - nval < 2:
        sys.exit(f"mkshard.py: {len(data)} tokens of text give a shard of fewer than 2 tokens: give more text")
    write_shard(a.train, data[: len(data) - nval])
    write_shard(a.val, data[len(data) - nval:])


if __name__ == "__main__":
    main()
