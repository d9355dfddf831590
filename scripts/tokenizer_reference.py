#!/usr/bin/env python3
"""Writes HuggingFace `tokenizers` reference ids for the BPE tokenizer tests.

For every tests/fixtures/tokenizers/<name>/tokenizer.json this writes, next to it:
    reference_ids.txt   one line per line of test_text.txt: the space-separated ids
                                            of tok.encode(line, add_special_tokens=False).ids
    reference_full.txt  one line: the ids of the whole test_text.txt in one call
    reference_info.txt  the `tokenizers` version that produced them

Lines of test_text.txt are split on "\\n" only (a "\\r" before it stays in the
line), exactly as framework/tokenizers/bpe_tokenizer_test.cc splits them.

Usage: python3 scripts/tokenizer_reference.py [FIXTURE_ROOT]
(needs `pip install tokenizers`; it is installed on the GPU machine.)
"""

import os
import sys

import tokenizers
from tokenizers import Tokenizer


def split_lines(text):
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        here, "..", "tests", "fixtures", "tokenizers")
    with open(os.path.join(root, "test_text.txt"), encoding="utf-8",
              newline="") as f:
        text = f.read()
    lines = split_lines(text)
    written = 0
    for name in sorted(os.listdir(root)):
        path = os.path.join(root, name, "tokenizer.json")
        if not os.path.isfile(path):
            continue
        tok = Tokenizer.from_file(path)
        out_dir = os.path.join(root, name)
        with open(os.path.join(out_dir, "reference_ids.txt"), "w",
                  encoding="utf-8", newline="\n") as f:
            for line in lines:
                ids = tok.encode(line, add_special_tokens=False).ids
                f.write(" ".join(str(i) for i in ids) + "\n")
        with open(os.path.join(out_dir, "reference_full.txt"), "w",
                  encoding="utf-8", newline="\n") as f:
            ids = tok.encode(text, add_special_tokens=False).ids
            f.write(" ".join(str(i) for i in ids) + "\n")
        with open(os.path.join(out_dir, "reference_info.txt"), "w",
                  encoding="utf-8", newline="\n") as f:
            f.write("tokenizers %s\n" % tokenizers.__version__)
        print("%s: %d lines, %d ids in the whole text" % (name, len(lines), len(ids)))
        written += 1
    if not written:
        sys.exit("no <name>/tokenizer.json under %s" % root)


if __name__ == "__main__":
    main()
