#!/usr/bin/env python3
"""Builds speclab's held-out prompt sets from the corpus TEST split.

    python3 scripts/build_prompts.py [--corpus data/corpus] [--out data/prompts]

Reads data/corpus/test.jsonl (written by scripts/build_corpus.sh) and writes
data/prompts/{code,prose,structured,copy}.jsonl, one JSON object a line:

    {"id": "code-03@python-stdlib/lib/python3.11/foo.py#L120",
     "task": "code", "prompt": "..."}

The id names the task, the prompt's index and where the prompt came from
(source/document, and the first line or character offset used). The output
is a deterministic function of the test split: documents are visited in the
order of a SHA-256 hash of (task, source, id); no randomness, no clock.
Standard library only. See docs/data.md for what each task contains.
"""

import argparse
import ast
import hashlib
import json
import os
import re
import sys
import textwrap

MIN_CHARS, MAX_CHARS = 200, 600
PER_TASK = 16

# How many prompts of each task come from each source.
PLAN = {
    "code": {"python-stdlib": 11, "python-tools": 5},
    "prose": {"kjv": 5, "python-docs": 5, "jargon": 3, "devil": 3},
    "structured": {"iso-codes": 5, "unicode-ucd": 6, "unicode-cldr": 5},
    "copy": {"python-stdlib": 4, "kjv": 3, "python-docs": 2, "jargon": 2,
             "devil": 1, "iso-codes": 1, "unicode-ucd": 2, "unicode-cldr": 1},
}
for _task, _plan in PLAN.items():
    assert sum(_plan.values()) == PER_TASK, _task


def digest(*parts):
    return hashlib.sha256("\t".join(parts).encode("utf-8")).hexdigest()


def ordered(docs, task):
    return sorted(docs, key=lambda d: digest(task, d["source"], d["id"]))


def target_length(key):
    """A length in [MIN_CHARS + 40, MAX_CHARS - 40], fixed by `key`."""
    span = MAX_CHARS - MIN_CHARS - 80
    return MIN_CHARS + 40 + int(digest(key)[:8], 16) % span


def lines_prefix(lines, start, target, min_rest=3):
    """The end index k (exclusive) so that lines[start:k] holds MIN..MAX chars,
    closest to `target`, leaving at least `min_rest` non-blank lines after."""
    best, size = None, 0
    for k in range(start + 1, len(lines) + 1):
        size += len(lines[k - 1])
        if size > MAX_CHARS:
            break
        rest = [l for l in lines[k:] if l.strip()]
        if size >= MIN_CHARS and len(rest) >= min_rest and lines[k].strip():
            if best is None or abs(size - target) < abs(best[1] - target):
                best = (k, size)
    return best[0] if best else None


# --- code: a held-out function or class, cut at a statement inside its body.

def code_prompt(doc, key):
    text = doc["text"]
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return None
    lines = text.splitlines(keepends=True)
    candidates = []
    for node in ast.walk(tree):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        first = min([node.lineno] + [d.lineno for d in node.decorator_list]) - 1
        last = node.end_lineno
        body_start = node.body[0].lineno - 1
        # Cut points: the first line of any statement inside the body, after
        # the first body statement (so the prompt holds some of the body).
        cuts = sorted({s.lineno - 1 for s in ast.walk(node)
                       if isinstance(s, ast.stmt) and s is not node
                       and s.lineno - 1 > body_start and s.lineno - 1 < last - 2})
        if not cuts:
            continue
        candidates.append((digest(key, str(first)), first, last, cuts))
    target = target_length(key)
    for _, first, last, cuts in sorted(candidates):
        best = None
        for cut in cuts:
            size = sum(len(l) for l in lines[first:cut])
            if MIN_CHARS <= size <= MAX_CHARS and (
                    best is None or abs(size - target) < abs(best[1] - target)):
                best = (cut, size)
        if best:
            prompt = textwrap.dedent("".join(lines[first:best[0]]))
            return prompt, f"L{first + 1}"
    return None


# --- prose: the start of a held-out passage, cut at a sentence end.

def sentence_cut(text, target):
    """text[:k] with MIN..MAX chars ending a sentence (or, failing that, a
    word), closest to `target`."""
    ends = [m.end() for m in re.finditer(r"[.!?;:][\"'\u201d)]?(?=\s)", text[:MAX_CHARS + 1])]
    ends = [k for k in ends if MIN_CHARS <= k <= MAX_CHARS]
    if not ends:
        ends = [m.start() for m in re.finditer(r"\S(?=\s)", text[:MAX_CHARS])]
        ends = [k + 1 for k in ends if MIN_CHARS <= k + 1 <= MAX_CHARS]
    if not ends:
        return None
    return min(ends, key=lambda k: (abs(k - target), k))


def passage_starts(doc):
    """Character offsets where a held-out passage starts in `doc`."""
    text, source = doc["text"], doc["source"]
    if source == "python-docs":
        # Paragraphs of plain prose: not directives, titles, lists or code.
        starts = []
        for m in re.finditer(r"(?:^|\n\n)([A-Z][^\n]{40,})", text):
            para = text[m.start(1):].split("\n\n", 1)[0]
            if len(para) >= 120 and "::" not in para[:80]:
                starts.append(m.start(1))
        return starts
    return [0]  # kjv chapter, dictionary entries: the document's start


CODE_OR_MARKUP = re.compile(r"::\s*(\n|$)|\n\s*\.\. |\n {2,}\S|\n[-=*~^]{3,}")


def prose_prompt(doc, key):
    text = doc["text"]
    for start in sorted(passage_starts(doc), key=lambda s: digest(key, str(s))):
        cut = sentence_cut(text[start:], target_length(key))
        if not cut or len(text) - start - cut < 100:
            continue
        prompt = text[start:start + cut]
        if doc["source"] == "python-docs" and CODE_OR_MARKUP.search(prompt):
            continue  # literal blocks, directives, indented examples
        return prompt, f"c{start}"
    return None


# --- structured: a prefix of a held-out record list, cut at a line end.

def records_start(doc):
    lines = doc["text"].splitlines(keepends=True)
    if doc["source"] == "unicode-ucd":
        for i, line in enumerate(lines):  # skip the comment header
            if line.strip() and not line.startswith("#"):
                return lines, i
    if doc["source"] == "unicode-cldr":
        for i, line in enumerate(lines):  # skip <?xml ...>, DOCTYPE, the licence comment
            if re.match(r"\s*<[A-Za-z]", line) and i > 0:
                return lines, i
    return lines, 0


def structured_prompt(doc, key):
    lines, start = records_start(doc)
    end = lines_prefix(lines, start, target_length(key))
    if end is None:
        return None
    return "".join(lines[start:end]), f"L{start + 1}"


# --- copy: a passage, a blank line, then the passage's beginning again.

def copy_prompt(doc, key):
    text = doc["text"]
    if doc["category"] == "prose":
        starts = passage_starts(doc)
        for start in sorted(starts, key=lambda s: digest(key, str(s))):
            body = text[start:]
            cut = sentence_cut(body, MIN_CHARS + 120)
            if not cut or cut > 420:
                continue
            passage = body[:cut]
            # The beginning again: its first line, or ~60-120 chars of it.
            head = passage.split("\n", 1)[0]
            if len(head) > 120 or len(head) < 30:
                words = [m.end() for m in re.finditer(r"\S(?=\s)", passage[:121])]
                words = [k for k in words if k >= 60] or words
                head = passage[:words[0] if words else 60]
            return passage + "\n\n" + head, f"c{start}"
        return None
    if doc["category"] == "code":
        found = code_prompt(doc, key)
        if not found:
            return None
        passage, where = found
    else:
        found = structured_prompt(doc, key)
        if not found:
            return None
        passage, where = found
    lines = passage.splitlines(keepends=True)
    while len("".join(lines)) > 420 and len(lines) > 4:
        lines.pop()
    passage = "".join(lines).rstrip("\n") + "\n"
    head = "".join(lines[:2] if len(lines[0]) < 60 else lines[:1])
    return passage + "\n" + head, where


BUILDERS = {"code": code_prompt, "prose": prose_prompt,
            "structured": structured_prompt, "copy": copy_prompt}


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--corpus", default=os.path.join(root, "data/corpus"))
    parser.add_argument("--out", default=os.path.join(root, "data/prompts"))
    args = parser.parse_args()

    path = os.path.join(args.corpus, "test.jsonl")
    if not os.path.exists(path):
        sys.exit(f"{path} not found: run scripts/build_corpus.sh first")
    with open(path, encoding="utf-8") as f:
        docs = [json.loads(line) for line in f]

    os.makedirs(args.out, exist_ok=True)
    used = set()  # (source, id): a document gives at most one prompt overall
    for task, plan in PLAN.items():
        prompts = []
        for source, count in plan.items():
            pool = ordered([d for d in docs if d["source"] == source], task)
            taken = 0
            for doc in pool:
                if taken == count:
                    break
                if (source, doc["id"]) in used:
                    continue
                found = BUILDERS[task](doc, digest(task, source, doc["id"]))
                if not found:
                    continue
                prompt, where = found
                if not MIN_CHARS <= len(prompt) <= MAX_CHARS:
                    continue
                used.add((source, doc["id"]))
                prompts.append((source, doc["id"], where, prompt))
                taken += 1
            if taken < count:
                sys.exit(f"{task}: only {taken} of {count} prompts from {source}")
        out = os.path.join(args.out, f"{task}.jsonl")
        with open(out, "w", encoding="utf-8", newline="\n") as f:
            for k, (source, doc_id, where, prompt) in enumerate(prompts):
                record = {"id": f"{task}-{k:02d}@{source}/{doc_id}#{where}",
                          "task": task, "prompt": prompt}
                f.write(json.dumps(record, ensure_ascii=False) + "\n")
        sizes = [len(p[3]) for p in prompts]
        print(f"{out}: {len(prompts)} prompts, {min(sizes)}-{max(sizes)} chars "
              f"(mean {sum(sizes) / len(sizes):.0f})")


if __name__ == "__main__":
    main()
