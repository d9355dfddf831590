#!/usr/bin/env bash
# Builds speclab's training corpus and its SentencePiece tokenizer.
#
#   scripts/build_corpus.sh            # from the repository root (or anywhere)
#
# Outputs (see docs/data.md for the full description):
#   data/corpus/{train,valid,test}.txt  documents, each ended by a line "<|endoftext|>"
#   data/corpus/test.jsonl              the test documents with source/category/id
#   data/corpus/manifest.tsv            split, source, category, id, bytes per document
#   data/corpus/sources.tsv             Debian package, version and licence per source
#   data/corpus/summary.txt             bytes per source and split (also printed)
#   data/tokenizer/speclab.{model,vocab}
#
# Everything comes from Debian packages: tools are installed with apt-get; the
# data packages are fetched with `apt-get download` and unpacked with dpkg-deb
# into data/corpus/.cache (not installed: the dict-* packages would pull in the
# dictd daemon). The KJV text is read with the `bible` program of bible-kjv,
# which is installed because the text is stored in its own compressed format.
#
# Idempotent: downloads are kept in the cache; the corpus is regenerated
# byte-identically; an existing data/tokenizer/speclab.model is kept
# (SPECLAB_FORCE_SPM=1 retrains it; training is deterministic).
# SPECLAB_CORPUS_ONLY=1 stops after the corpus.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
CORPUS=data/corpus
CACHE=$CORPUS/.cache
TOKDIR=data/tokenizer
mkdir -p "$CACHE/debs" "$CACHE/pkgs" "$TOKDIR"
export LC_ALL=C.UTF-8

log() { printf '[build_corpus] %s\n' "$*" >&2; }

SUDO=""
if [[ $(id -u) -ne 0 ]]; then SUDO=sudo; fi
APT_UPDATED=0
apt_update_once() {
  if [[ $APT_UPDATED -eq 0 ]]; then
    log "apt-get update"
    $SUDO apt-get update -qq
    APT_UPDATED=1
  fi
}

# --- 1. Tools: python3 (standard library only), sentencepiece, bible-kjv.
need=()
command -v python3 >/dev/null || need+=(python3)
command -v spm_train >/dev/null && command -v spm_encode >/dev/null || need+=(sentencepiece)
command -v bible >/dev/null && [[ -e /usr/lib/bible.data ]] || need+=(bible-kjv bible-kjv-text)
command -v dpkg-deb >/dev/null || need+=(dpkg)
if [[ ${#need[@]} -gt 0 ]]; then
  apt_update_once
  log "apt-get install ${need[*]}"
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y --no-install-recommends "${need[@]}"
fi

# --- 2. Data packages: download once, unpack only the parts we read.
# package | tar patterns (inside the .deb) to unpack, besides the copyright file.
DATA_PKGS=(
  "libpython3.11-minimal|./usr/lib/python3.11/*.py"
  "libpython3.11-stdlib|./usr/lib/python3.11/*.py"
  "python3-lib2to3|./usr/lib/python3.11/*.py"
  "python3-distutils|./usr/lib/python3.11/*.py"
  "idle-python3.11|./usr/lib/python3.11/*.py"
  "python3-tk|./usr/lib/python3.11/*.py"
  "python3.11-examples|./usr/share/doc/python3.11/examples/*.py ./usr/lib/python3.11/*.py"
  "python3.11-doc|./usr/share/doc/python3.11/html/_sources/*"
  "dict-jargon|./usr/share/dictd/*"
  "dict-devil|./usr/share/dictd/*"
  "iso-codes|./usr/share/iso-codes/json/*"
  "unicode-data|./usr/share/unicode/*.txt"
  "unicode-cldr-core|./usr/share/unicode/cldr/common/supplemental/* ./usr/share/unicode/cldr/common/bcp47/* ./usr/share/unicode/cldr/common/main/en*.xml ./usr/share/unicode/cldr/common/main/root.xml"
)
for entry in "${DATA_PKGS[@]}"; do
  pkg=${entry%%|*}
  patterns=${entry#*|}
  deb=$(ls "$CACHE"/debs/"${pkg}"_*.deb 2>/dev/null | head -n1 || true)
  if [[ -z $deb ]]; then
    log "apt-get download $pkg"
    if ! (cd "$CACHE/debs" && apt-get download -q "$pkg" >/dev/null 2>&1); then
      apt_update_once
      (cd "$CACHE/debs" && apt-get download -q "$pkg" >/dev/null)
    fi
    deb=$(ls "$CACHE"/debs/"${pkg}"_*.deb | head -n1)
  fi
  dest=$CACHE/pkgs/$pkg
  stamp=$dest/.unpacked
  if [[ ! -f $stamp || $(cat "$stamp") != "$(basename "$deb") $patterns" ]]; then
    log "unpack $(basename "$deb")"
    rm -rf "$dest" && mkdir -p "$dest"
    # shellcheck disable=SC2086  # patterns are word-split on purpose
    dpkg-deb --fsys-tarfile "$deb" |
      tar -x -C "$dest" --wildcards $patterns "./usr/share/doc/$pkg"
    dpkg-deb -f "$deb" Version >"$dest/.version"
    echo "$(basename "$deb") $patterns" >"$stamp"
  fi
done
# Versions of the installed packages whose files we read directly.
for pkg in bible-kjv bible-kjv-text; do
  mkdir -p "$CACHE/pkgs/$pkg/usr/share/doc/$pkg"
  dpkg-query -W -f='${Version}\n' "$pkg" >"$CACHE/pkgs/$pkg/.version"
  cp "/usr/share/doc/$pkg/copyright" "$CACHE/pkgs/$pkg/usr/share/doc/$pkg/copyright"
done
log "KJV text via: bible -l100000 gen1:1-rev22:21"
bible -l100000 "gen1:1-rev22:21" >"$CACHE/kjv.txt"

# --- 3. Extract, normalise, split.
python3 - "$CACHE" "$CORPUS" <<'PYTHON'
"""Corpus assembly: documents from every source, normalised and split."""
import gzip
import hashlib
import json
import os
import re
import sys
import unicodedata

CACHE, CORPUS = sys.argv[1], sys.argv[2]
PKGS = os.path.join(CACHE, "pkgs")
SEP = "<|endoftext|>"
MAX_LINE = 1000         # characters; longer lines are dropped (counted)
CHUNK = 16 * 1024       # structured files are cut into documents of ~16 KB
DICT_GROUP = 4 * 1024   # dictionary entries are grouped into ~4 KB documents
MAX_EXOTIC = 20         # structured documents with more distinct non-Latin characters are dropped

# Licence of each source: (package(s), licence name as in the copyright file,
# a string that must occur in that copyright file, category).
SOURCES = {
    "python-stdlib": (["libpython3.11-minimal", "libpython3.11-stdlib",
                       "python3-lib2to3", "python3-distutils",
                       "idle-python3.11", "python3-tk"],
                      "Python Software Foundation License Version 2",
                      "PYTHON SOFTWARE FOUNDATION LICENSE VERSION 2", "code"),
    "python-tools": (["python3.11-examples"],
                     "Python Software Foundation License Version 2",
                     "PYTHON SOFTWARE FOUNDATION LICENSE VERSION 2", "code"),
    "python-docs": (["python3.11-doc"],
                    "Python Software Foundation License Version 2",
                    "PYTHON SOFTWARE FOUNDATION LICENSE VERSION 2", "prose"),
    "kjv": (["bible-kjv-text", "bible-kjv"],
            "public domain (\"The copyright for the King James Version text "
            "of the Bible is expired\"); reader program GPL-2+",
            "The copyright for the King James Version text of the Bible is expired",
            "prose"),
    "jargon": (["dict-jargon"], "public-domain",
               "The Jargon File is in the public domain", "prose"),
    "devil": (["dict-devil"], "public domain (\"A Public Domain Text, Copyright Expired\")",
              "A Public Domain Text, Copyright Expired", "prose"),
    "iso-codes": (["iso-codes"], "LGPL-2.1+", "License: LGPL-2.1+", "structured"),
    "unicode-ucd": (["unicode-data"], "Unicode, Inc. License Agreement - Data Files and Software",
                    "UNICODE, INC. LICENSE AGREEMENT - DATA FILES AND SOFTWARE",
                    "structured"),
    "unicode-cldr": (["unicode-cldr-core"], "Unicode-DFS-2016", "License:   Unicode-DFS-2016",
                     "structured"),
}

stats = {"dropped_lines": 0, "dropped_docs": 0, "inventory_docs": 0}


def pkg_root(pkg):
    return os.path.join(PKGS, pkg)


def read_text(path):
    with open(path, "rb") as f:
        data = f.read()
    return data.decode("utf-8")


CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f]")


def normalise(text):
    """UTF-8 NFC, \\n line ends, no control characters but \\t, no huge lines."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = unicodedata.normalize("NFC", text)
    text = CONTROL.sub("", text)
    lines = []
    for line in text.split("\n"):
        line = line.rstrip()
        if len(line) > MAX_LINE:
            stats["dropped_lines"] += 1
            continue
        lines.append(line)
    text = "\n".join(lines).strip("\n")
    text = re.sub(r"\n{4,}", "\n\n\n", text)
    return text + "\n" if text else ""


def chunk_lines(lines, size, can_cut=lambda line: True):
    """Groups lines into chunks of about `size` characters, cutting only
    before lines accepted by `can_cut`."""
    chunks, cur, cur_len = [], [], 0
    for line in lines:
        if cur and cur_len >= size and can_cut(line):
            chunks.append(cur)
            cur, cur_len = [], 0
        cur.append(line)
        cur_len += len(line) + 1
    if cur:
        chunks.append(cur)
    return ["".join(c) for c in chunks]


# --- Sources: each yields (doc_id, text).

def python_stdlib():
    seen = set()
    for pkg in SOURCES["python-stdlib"][0]:
        base = os.path.join(pkg_root(pkg), "usr/lib/python3.11")
        for dirpath, dirnames, filenames in os.walk(base):
            dirnames.sort()
            for name in sorted(filenames):
                if not name.endswith(".py"):
                    continue
                path = os.path.join(dirpath, name)
                rel = os.path.relpath(path, base)
                if rel in seen:
                    continue
                seen.add(rel)
                if (rel.startswith("pydoc_data/") or rel.startswith("_sysconfigdata")
                        or "/tests/data/" in rel or os.path.getsize(path) > 256 * 1024):
                    continue
                try:
                    text = read_text(path)
                except UnicodeDecodeError:
                    stats["dropped_docs"] += 1
                    continue
                # Generated charmap codecs are giant tables, not code.
                if "Python Character Mapping Codec" in text[:400]:
                    continue
                yield "lib/python3.11/" + rel, text


def python_tools():
    """CPython's Tools/ (Debian's examples) and turtledemo."""
    root = pkg_root("python3.11-examples")
    for sub, prefix in (("usr/share/doc/python3.11/examples", "Tools/"),
                        ("usr/lib/python3.11", "lib/python3.11/")):
        base = os.path.join(root, sub)
        for dirpath, dirnames, filenames in os.walk(base):
            dirnames.sort()
            for name in sorted(filenames):
                path = os.path.join(dirpath, name)
                if name.endswith(".py") and os.path.getsize(path) <= 256 * 1024:
                    try:
                        yield prefix + os.path.relpath(path, base), read_text(path)
                    except UnicodeDecodeError:
                        stats["dropped_docs"] += 1


PYDOC_DIRS = ("tutorial", "howto", "faq", "reference", "using", "library")


def python_docs():
    base = os.path.join(pkg_root("python3.11-doc"), "usr/share/doc/python3.11/html/_sources")
    for dirpath, dirnames, filenames in os.walk(base):
        dirnames.sort()
        for name in sorted(filenames):
            rel = os.path.relpath(os.path.join(dirpath, name), base)
            top = rel.split("/")[0]
            if name.endswith(".rst.txt") and (top in PYDOC_DIRS or rel == "glossary.rst.txt"):
                yield "Doc/" + rel[: -len(".txt")], read_text(os.path.join(dirpath, name))


def kjv():
    """One document per chapter: the heading, then one verse per line."""
    doc_id, lines = None, []
    with open(os.path.join(CACHE, "kjv.txt"), encoding="utf-8") as f:
        for raw in f:
            line = raw.rstrip("\n")
            m = re.match(r"^(\S.*\S) (\d+)$", line)
            if m and not line.startswith(" "):
                if doc_id:
                    yield doc_id, "\n".join(lines) + "\n"
                doc_id, lines = line, [line, ""]
            elif line.strip():
                lines.append(line.strip())
    if doc_id:
        yield doc_id, "\n".join(lines) + "\n"


B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"


def b64(s):
    v = 0
    for c in s:
        v = v * 64 + B64.index(c)
    return v


def dictd(pkg, name):
    """dictd databases: entries in index order, grouped into ~4 KB documents."""
    base = os.path.join(pkg_root(pkg), "usr/share/dictd")
    with gzip.open(os.path.join(base, name + ".dict.dz")) as f:
        data = f.read()
    entries, seen = [], set()
    with open(os.path.join(base, name + ".index"), encoding="utf-8") as f:
        for line in f:
            word, off, size = line.rstrip("\n").split("\t")
            if word.startswith("00database") or (off, size) in seen:
                continue
            seen.add((off, size))
            body = data[b64(off): b64(off) + b64(size)].decode("utf-8")
            body = body.replace("\u00a0", " ")
            if pkg == "dict-jargon":  # "word\n pron, n.\n\n    body": undo the indent
                lines = body.split("\n")
                body = "\n".join([lines[0]] + [l[4:] if l.startswith("    ") else l.strip()
                                                for l in lines[1:]])
            entries.append((word, body.strip("\n") + "\n\n"))
    group, size = [], 0
    for word, body in entries:
        group.append((word, body))
        size += len(body)
        if size >= DICT_GROUP:
            yield f"{group[0][0]}..{group[-1][0]}", "".join(b for _, b in group)
            group, size = [], 0
    if group:
        yield f"{group[0][0]}..{group[-1][0]}", "".join(b for _, b in group)


def iso_codes():
    """Each JSON file's record list, re-serialised in chunks that stay valid JSON."""
    base = os.path.join(pkg_root("iso-codes"), "usr/share/iso-codes/json")
    for name in sorted(os.listdir(base)):
        if not name.startswith("iso_") or not name.endswith(".json"):
            continue
        with open(os.path.join(base, name), encoding="utf-8") as f:
            obj = json.load(f)
        (key, records), = obj.items()
        chunk, size, k = [], 0, 0
        for rec in records:
            chunk.append(rec)
            size += len(json.dumps(rec, ensure_ascii=False, indent=2)) + 8
            if size >= CHUNK:
                yield f"{name}#{k}", json.dumps({key: chunk}, ensure_ascii=False, indent=2)
                chunk, size, k = [], 0, k + 1
        if chunk:
            yield f"{name}#{k}", json.dumps({key: chunk}, ensure_ascii=False, indent=2)


UCD_FILES = [
    "UnicodeData.txt", "Blocks.txt", "Scripts.txt", "ScriptExtensions.txt",
    "PropList.txt", "DerivedAge.txt", "LineBreak.txt", "EastAsianWidth.txt",
    "CaseFolding.txt", "SpecialCasing.txt", "PropertyAliases.txt",
    "PropertyValueAliases.txt", "ArabicShaping.txt", "BidiMirroring.txt",
    "BidiBrackets.txt", "Jamo.txt", "NameAliases.txt", "NamedSequences.txt",
    "IndicSyllabicCategory.txt", "IndicPositionalCategory.txt",
    "VerticalOrientation.txt", "HangulSyllableType.txt", "EquivalentUnifiedIdeograph.txt",
    "CompositionExclusions.txt", "NamesList.txt",
]


def unicode_ucd():
    base = os.path.join(pkg_root("unicode-data"), "usr/share/unicode")
    for name in UCD_FILES:
        path = os.path.join(base, name)
        if not os.path.exists(path):
            continue
        with open(path, encoding="utf-8") as f:
            lines = f.readlines()
        for k, text in enumerate(chunk_lines(lines, CHUNK)):
            yield f"{name}#{k}", text


XML_CUT = re.compile(r"^ {0,8}<(?!/)")


def unicode_cldr():
    base = os.path.join(pkg_root("unicode-cldr-core"), "usr/share/unicode/cldr/common")
    for sub in ("supplemental", "bcp47", "main"):
        for name in sorted(os.listdir(os.path.join(base, sub))):
            if not name.endswith(".xml"):
                continue
            with open(os.path.join(base, sub, name), encoding="utf-8") as f:
                lines = f.readlines()
            for k, text in enumerate(chunk_lines(lines, CHUNK, XML_CUT.match)):
                yield f"{sub}/{name}#{k}", text


EXTRACTORS = {
    "python-stdlib": python_stdlib,
    "python-tools": python_tools,
    "python-docs": python_docs,
    "kjv": kjv,
    "jargon": lambda: dictd("dict-jargon", "jargon"),
    "devil": lambda: dictd("dict-devil", "devil"),
    "iso-codes": iso_codes,
    "unicode-ucd": unicode_ucd,
    "unicode-cldr": unicode_cldr,
}


def exotic_chars(text):
    """Distinct characters beyond Latin Extended-B and general punctuation."""
    return sum(1 for ch in set(text) if ord(ch) > 0x24F and not 0x2000 <= ord(ch) <= 0x206F)


def key_hash(source, doc_id):
    return int(hashlib.sha256(f"{source}\t{doc_id}".encode()).hexdigest()[:16], 16)


def split_of(h):
    bucket = h % 100
    return "train" if bucket < 90 else ("valid" if bucket < 95 else "test")


# Licence checks: the expected text must be in each package's copyright file.
source_rows = []
for source, (pkgs, licence, must, category) in SOURCES.items():
    versions = []
    for pkg in pkgs:
        root = pkg_root(pkg)
        with open(os.path.join(root, ".version")) as f:
            versions.append(f"{pkg}={f.read().strip()}")
        doc = os.path.join(root, "usr/share/doc", pkg)
        if os.path.islink(doc):  # e.g. libpython3.11-stdlib -> libpython3.11-minimal
            target = os.path.basename(os.readlink(doc))
            doc = os.path.join(pkg_root(target), "usr/share/doc", target)
        copyright_text = read_text(os.path.join(doc, "copyright"))
        if pkg != "bible-kjv" and must not in copyright_text:
            sys.exit(f"licence check failed: {must!r} not in {pkg}'s copyright file")
    source_rows.append((source, category, " ".join(versions), licence))

docs = []  # (hash, split, source, category, doc_id, text)
for source, extract in EXTRACTORS.items():
    category = SOURCES[source][3]
    for doc_id, text in extract():
        text = normalise(text)
        if not text or SEP in text or len(text) < 64:
            stats["dropped_docs"] += 1
            continue
        # Character inventories (e.g. CLDR dayPeriods.xml names every script)
        # would spend the vocabulary on characters seen once.
        if category == "structured" and exotic_chars(text) > MAX_EXOTIC:
            stats["inventory_docs"] += 1
            continue
        h = key_hash(source, doc_id)
        docs.append((h, split_of(h), source, category, doc_id, text))
docs.sort(key=lambda d: (d[0], d[2], d[4]))  # a fixed, source-interleaved order

sizes = {}
files = {s: open(os.path.join(CORPUS, f"{s}.txt"), "w", encoding="utf-8", newline="\n")
         for s in ("train", "valid", "test")}
with open(os.path.join(CORPUS, "manifest.tsv"), "w", encoding="utf-8") as manifest, \
        open(os.path.join(CORPUS, "test.jsonl"), "w", encoding="utf-8") as test_jsonl:
    manifest.write("split\tsource\tcategory\tid\tbytes\n")
    for h, split, source, category, doc_id, text in docs:
        files[split].write(text + SEP + "\n")
        n = len(text.encode("utf-8"))
        sizes[(source, split)] = sizes.get((source, split), [0, 0])
        sizes[(source, split)][0] += n
        sizes[(source, split)][1] += 1
        manifest.write(f"{split}\t{source}\t{category}\t{doc_id}\t{n}\n")
        if split == "test":
            test_jsonl.write(json.dumps({"source": source, "category": category,
                                         "id": doc_id, "text": text},
                                        ensure_ascii=False) + "\n")
for f in files.values():
    f.close()

with open(os.path.join(CORPUS, "sources.tsv"), "w", encoding="utf-8") as f:
    f.write("source\tcategory\tpackages\tlicence\n")
    for row in source_rows:
        f.write("\t".join(row) + "\n")

out = []
out.append(f"{'source':<14} {'category':<10} {'train':>12} {'valid':>10} {'test':>10} {'total':>12}  docs")
tot = {"train": 0, "valid": 0, "test": 0}
cat_tot = {}
for source in EXTRACTORS:
    row = [sizes.get((source, s), [0, 0]) for s in ("train", "valid", "test")]
    for s, (b, _) in zip(("train", "valid", "test"), row):
        tot[s] += b
    total = sum(b for b, _ in row)
    cat = SOURCES[source][3]
    cat_tot[cat] = cat_tot.get(cat, 0) + total
    out.append(f"{source:<14} {cat:<10} {row[0][0]:>12,} {row[1][0]:>10,} {row[2][0]:>10,} "
               f"{total:>12,}  {row[0][1]}/{row[1][1]}/{row[2][1]}")
out.append(f"{'all':<14} {'':<10} {tot['train']:>12,} {tot['valid']:>10,} {tot['test']:>10,} "
           f"{sum(tot.values()):>12,}")
out.append("by category: " + ", ".join(f"{c} {b:,}" for c, b in cat_tot.items()))
out.append(f"dropped: {stats['dropped_lines']} lines over {MAX_LINE} chars, "
           f"{stats['dropped_docs']} documents (undecodable, empty or tiny), "
           f"{stats['inventory_docs']} structured documents with > {MAX_EXOTIC} distinct non-Latin characters")
summary = "\n".join(out) + "\n"
with open(os.path.join(CORPUS, "summary.txt"), "w", encoding="utf-8") as f:
    f.write(summary)
print(summary, end="")
PYTHON

if [[ ${SPECLAB_CORPUS_ONLY:-0} == 1 ]]; then exit 0; fi

# --- 4. Tokenizer: SentencePiece BPE on train.txt.
# spm_train reads one sentence per line, so it never sees "\n": the newline is
# encoded by byte fallback as the single piece <0x0A> (a user-defined "\n"
# piece would work as well but writes a raw newline into speclab.vocab).
# The separator lines are left out of its input.
SPM_INPUT=$CACHE/spm_input.txt
grep -v -x -F '<|endoftext|>' "$CORPUS/train.txt" >"$SPM_INPUT" || true
SPM_FLAGS=(
  --model_type=bpe
  --vocab_size=8000
  --character_coverage=1.0
  --byte_fallback=true
  --split_digits=true
  --normalization_rule_name=identity
  --remove_extra_whitespaces=false
  --add_dummy_prefix=false
  --allow_whitespace_only_pieces=true
  --split_by_whitespace=true
  --max_sentencepiece_length=16
  --max_sentence_length=4192
  --unk_id=0 --bos_id=1 --eos_id=2 --pad_id=3
  --input_sentence_size=0
  --shuffle_input_sentence=false
  --random_seed=20240601
  --num_threads=1
)
spm_stamp="$(sha256sum "$SPM_INPUT" | cut -d' ' -f1) $(printf '%q ' "${SPM_FLAGS[@]}" | sha256sum | cut -d' ' -f1)"
# The committed model is kept unless it is missing or SPECLAB_FORCE_SPM=1:
# retraining on other package versions would renumber the vocabulary under
# every checkpoint trained so far.
if [[ ${SPECLAB_FORCE_SPM:-0} != 1 && -f $TOKDIR/speclab.model ]]; then
  if [[ -f $CACHE/spm.stamp && $(cat "$CACHE/spm.stamp") == "$spm_stamp" ]]; then
    log "tokenizer up to date ($TOKDIR/speclab.model)"
  else
    log "keeping $TOKDIR/speclab.model (spm input sha256 ${spm_stamp%% *});" \
        "SPECLAB_FORCE_SPM=1 retrains it"
  fi
else
  log "spm_train (bpe, vocab 8000) ..."
  spm_train --input="$SPM_INPUT" --model_prefix="$TOKDIR/speclab" "${SPM_FLAGS[@]}" \
    --minloglevel=1 2>"$CACHE/spm_train.log" ||
    { tail -n 30 "$CACHE/spm_train.log" >&2; exit 1; }
  echo "$spm_stamp" >"$CACHE/spm.stamp"
fi
log "spm input sha256 ${spm_stamp%% *}; model md5 $(md5sum <"$TOKDIR/speclab.model" | cut -d' ' -f1)"

# --- 5. Checks and token counts. spm_encode/spm_decode work line by line, so
# this checks the round trip of every line of valid and test; a newline is one
# <0x0A> token (framework/tokenizers/tokenizer_test.cc checks whole documents).
python3 - "$CORPUS" "$TOKDIR/speclab.model" <<'PYTHON'
import subprocess, sys
corpus, model = sys.argv[1], sys.argv[2]
SEP = "<|endoftext|>"
rows = [l.rstrip("\n").split("\t") for l in open(f"{corpus}/manifest.tsv", encoding="utf-8")][1:]
out = [f"{'tokens':<14} {'train':>12} {'valid':>10} {'test':>10}   bytes/token (train)"]
counts = {}
tot = {"train": 0, "valid": 0, "test": 0}
for split in ("train", "valid", "test"):
    with open(f"{corpus}/{split}.txt", encoding="utf-8") as f:
        docs = f.read().split(SEP + "\n")[:-1]
    meta = [r for r in rows if r[0] == split]
    assert len(meta) == len(docs), (split, len(meta), len(docs))
    by_source = {}
    for r, d in zip(meta, docs):
        by_source.setdefault(r[1], []).append(d)
    for source, texts in by_source.items():
        lines = "".join(texts).split("\n")[:-1]
        enc = subprocess.run(["spm_encode", f"--model={model}", "--output_format=id"],
                             input="\n".join(lines) + "\n", capture_output=True,
                             text=True, check=True).stdout
        n_tokens = sum(len(l.split()) for l in enc.split("\n")) + len(lines)
        counts[(source, split)] = (n_tokens, sum(len(t.encode()) for t in texts), len(texts))
        if split != "train":
            dec = subprocess.run(["spm_decode", f"--model={model}", "--input_format=id"],
                                 input=enc, capture_output=True, text=True,
                                 check=True).stdout.split("\n")[:-1]
            bad = [(a, b) for a, b in zip(lines, dec) if a != b]
            if bad or len(dec) != len(lines):
                sys.exit(f"round trip failed for {source}/{split}: {bad[:3]}")
order = [l.split("\t")[0] for l in open(f"{corpus}/sources.tsv", encoding="utf-8")][1:]
sources = [s for s in order if any((s, sp) in counts for sp in tot)]
for source in sources:
    c = [counts.get((source, s), (0, 0, 0)) for s in ("train", "valid", "test")]
    for s, x in zip(("train", "valid", "test"), c):
        tot[s] += x[0]
    out.append(f"{source:<14} {c[0][0]:>12,} {c[1][0]:>10,} {c[2][0]:>10,}   "
               f"{c[0][1] / max(c[0][0], 1):.2f}")
out.append(f"{'all':<14} {tot['train']:>12,} {tot['valid']:>10,} {tot['test']:>10,}   "
           "(newlines counted, one <|endoftext|>/eos per document not counted)")
out.append("round trip (spm_encode | spm_decode, every line of valid and test): ok")
text = "\n".join(out) + "\n"
with open(f"{corpus}/summary.txt", "a", encoding="utf-8") as f:
    f.write(text)
print(text, end="")
PYTHON
