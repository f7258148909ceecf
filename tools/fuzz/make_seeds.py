#!/usr/bin/env python3
"""Writes small valid safetensors files as the seed corpus of fuzz_safetensors.

Each seed exercises a different part of the format: every dtype, metadata, a scalar, an empty
tensor, a header padded with spaces, a file with no tensors. Usage:
    python3 tools/fuzz/make_seeds.py CORPUS_DIR
"""

import json
import os
import struct
import sys

SIZES = {"BF16": 2, "F16": 2, "F32": 4, "F64": 8, "I64": 8, "I32": 4, "BOOL": 1, "U8": 1}


def image(tensors, metadata=None, pad=True):
    """tensors: list of (name, dtype, shape); data bytes alternate 0, 1 (valid for every dtype)."""
    header, data = {}, b""
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, dtype, shape in tensors:
        n = SIZES[dtype]
        for d in shape:
            n *= d
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + n]}
        data += bytes(i % 2 for i in range(n))
    text = json.dumps(header, separators=(",", ":"))
    if pad:
        text += " " * ((8 - len(text) % 8) % 8)
    return struct.pack("<Q", len(text)) + text.encode() + data


def main(out_dir):
    os.makedirs(out_dir, exist_ok=True)
    seeds = {
        "one_f32": image([("w", "F32", [2, 2])], {"format": "pt"}),
        "every_dtype": image([(f"t.{d.lower()}", d, [3]) for d in SIZES], {"format": "pt", "k": "v"}),
        "scalar_and_empty": image([("s", "F64", []), ("e", "F32", [0, 4]), ("b", "BF16", [1, 2, 3])],
                                  pad=False),
        "no_tensors": image([], {"format": "pt"}),
        "qwen_names": image([("model.embed_tokens.weight", "BF16", [8, 4]),
                             ("model.layers.0.self_attn.q_proj.bias", "F16", [4]),
                             ("lm_head.weight", "BF16", [8, 4])], {"format": "pt"}),
    }
    for name, data in seeds.items():
        with open(os.path.join(out_dir, name + ".safetensors"), "wb") as f:
            f.write(data)
    print(f"{len(seeds)} seeds written to {out_dir}")


if __name__ == "__main__":
    main(sys.argv[1])
