"""tiny_bpe.py DIR - write a byte-level BPE tokenizer of 23 tokens in GPT-2's two files (DIR/vocab.json,
DIR/merges.txt), for the tokenizer checks (tests/data.sh, tests/generate.sh). Its ids are worked out by hand:
Ġ is GPT-2's symbol of the space byte, Ã and © those of the bytes 0xC3 0xA9 (é in UTF-8). By the merges, in rank
order: "hello" = h|e|l|l|o -> he|l|l|o -> he|ll|o -> hell|o = [10, 3]; " wo" = Ġ|w|o -> Ġw|o -> Ġwo = [12];
"Hi!" = [13, 14, 15]; "é" = [16, 17]; "he" = [8]; <|endoftext|> = 22. decode(ids) below is the inverse written
out independently of any tokenizer library: the tokens' symbols joined, each symbol's byte, UTF-8 (invalid
sequences replaced). Standard library only.
"""
import json
import sys

TOKENS = "h e l o Ġ w r d he ll hell Ġw Ġwo H i ! Ã © a b c t".split() + ["<|endoftext|>"]
MERGES = ["h e", "l l", "he ll", "Ġ w", "Ġw o"]


def decode(ids):
    text = "".join(TOKENS[i] for i in ids)
    return bytes(0x20 if ch == "Ġ" else ord(ch) for ch in text).decode("utf-8", errors="replace")


if __name__ == "__main__":
    d = sys.argv[1]
    with open(d + "/vocab.json", "w", encoding="utf-8") as f:
        json.dump({t: i for i, t in enumerate(TOKENS)}, f, ensure_ascii=False)
    with open(d + "/merges.txt", "w", encoding="utf-8") as f:
        f.write("#version: 0.2\n" + "".join(m + "\n" for m in MERGES))
