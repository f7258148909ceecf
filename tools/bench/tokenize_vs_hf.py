#!/usr/bin/env python3
"""Encode throughput of sprig's tokenizer against Hugging Face `tokenizers` on one thread, on the
same lines with the same tokenizer.json; prints the ratio last (target: >= 1.00x).

    python3 -m venv /tmp/venv-tok && /tmp/venv-tok/bin/pip install tokenizers
    /tmp/venv-tok/bin/python tools/bench/tokenize_vs_hf.py [--sprig build/tools/sprig]
        [--tokenizer tests/golden/tokenizer] [--input FILE] [--min-seconds 2]

Without --input the corpus is the repository's own text: tests/golden/tokenizer/multilingual.txt
(many languages and scripts), README.md, CONTRIBUTING.md, docs/*.md and the C++ sources of data/,
nn/ and tools/, written to a temporary file; each non-empty line is one text. Both sides time
whole passes over every line, each pass with a freshly loaded tokenizer (an empty word cache):
HF with encode_batch_fast (its fastest path, no offsets; encode_batch
before 0.21) on one thread (TOKENIZERS_PARALLELISM=false, RAYON_NUM_THREADS=1) and
process CPU time, sprig with `sprig bench tokenize` (the thread's CPU time). The ids of both are
compared on every line first.
"""

import argparse
import json
import glob
import os
import re
import subprocess
import sys
import tempfile
import time

os.environ["TOKENIZERS_PARALLELISM"] = "false"
os.environ["RAYON_NUM_THREADS"] = "1"
os.environ["RAYON_RS_NUM_THREADS"] = "1"

from tokenizers import Tokenizer  # noqa: E402 (after the thread settings)

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def default_corpus():
    paths = [os.path.join(REPO, "tests/golden/tokenizer/multilingual.txt"),
             os.path.join(REPO, "README.md"), os.path.join(REPO, "CONTRIBUTING.md")]
    paths += sorted(glob.glob(os.path.join(REPO, "docs/*.md")))
    for folder in ("data", "nn", "tools"):
        paths += sorted(glob.glob(os.path.join(REPO, folder, "*.cpp")))
        paths += sorted(glob.glob(os.path.join(REPO, folder, "*.h")))
    text = b"".join(open(p, "rb").read() for p in paths)
    f = tempfile.NamedTemporaryFile(prefix="sprig_tokenize_", suffix=".txt", delete=False)
    f.write(text)
    f.close()
    return f.name


def hf_seconds_per_pass(tokenizer_json, lines, min_seconds):
    passes, total = 0, 0.0
    while total < min_seconds or passes < 2:
        tok = Tokenizer.from_file(tokenizer_json)
        # encode_batch_fast (tokenizers >= 0.21) skips the offsets: HF's fastest path.
        encode = getattr(tok, "encode_batch_fast", tok.encode_batch)
        start = time.process_time()
        encode(lines, add_special_tokens=False)
        total += time.process_time() - start
        passes += 1
    return total / passes


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sprig", default=os.path.join(REPO, "build/tools/sprig"))
    ap.add_argument("--tokenizer", default=os.path.join(REPO, "tests/golden/tokenizer"))
    ap.add_argument("--input")
    ap.add_argument("--min-seconds", type=float, default=2.0)
    args = ap.parse_args()
    path = args.input or default_corpus()
    with open(path, "rb") as f:
        raw = [line for line in f.read().split(b"\n") if line]
    lines = [line.decode("utf-8", errors="replace") for line in raw]
    tokenizer_json = os.path.join(args.tokenizer, "tokenizer.json")

    # Parity first: sprig data tokenize of the same lines must give HF's ids.
    hf_ids = [e.ids for e in Tokenizer.from_file(tokenizer_json).encode_batch(
        lines, add_special_tokens=False)]
    with tempfile.TemporaryDirectory() as tmp:
        records = os.path.join(tmp, "in.jsonl")
        with open(records, "w", encoding="utf-8") as f:
            for line in lines:
                f.write(json.dumps({"text": line}) + "\n")
        out = os.path.join(tmp, "out.jsonl")
        subprocess.run([args.sprig, "data", "tokenize", "--tokenizer", args.tokenizer, "--input",
                        records, "--out", out, "--format", "text"], check=True,
                       capture_output=True)
        with open(out, encoding="utf-8") as f:
            sprig_ids = [json.loads(l)["input_ids"] for l in f]
    same = sum(a == b for a, b in zip(hf_ids, sprig_ids))
    print(f"ids equal to HF on {same} of {len(lines)} lines")

    hf = hf_seconds_per_pass(tokenizer_json, lines, args.min_seconds)
    nbytes = sum(len(r) for r in raw)
    ntokens = sum(len(i) for i in hf_ids)
    print(f"HF tokenizers, one thread: {nbytes / hf / 1e6:8.2f} MB/s {ntokens / hf / 1e6:8.3f} "
          f"Mtok/s {hf:9.4f} s per pass")
    bench = subprocess.run([args.sprig, "bench", "tokenize", "--tokenizer", args.tokenizer,
                            "--input", path, "--min-seconds", str(args.min_seconds)],
                           check=True, capture_output=True, text=True).stdout
    print(bench, end="")
    sprig = float(re.search(r"one thread\s+[0-9.]+ MB/s\s+[0-9.]+ Mtok/s\s+([0-9.]+) s per pass",
                            bench).group(1))
    if not args.input:
        os.unlink(path)
    print(f"sprig / HF tokenizers encode throughput, one thread: {hf / sprig:.2f}x "
          f"(target >= 1.00x)")
    return 0 if same == len(lines) else 1


if __name__ == "__main__":
    sys.exit(main())
