#!/usr/bin/env python3
"""Writes the seed corpora of the libFuzzer targets, one folder per target.

The committed tools/fuzz/seeds/ is this script's output; run it again after changing a seed.
Each seed exercises a different part of its format:
  fuzz_safetensors   every dtype, metadata, a scalar, an empty tensor, padding, no tensors
  fuzz_readers       first byte = the reader and options (see fuzz_readers.cpp), then the file:
                     documents (loss_mask and labels forms), rollouts, token shards of both widths
  fuzz_train_config  first byte = the recipe (fuzz_train_config.cpp), then YAML, "%%", the
                     command line's overrides, a word a line (--a.b=value, or --a.b and value)
  fuzz_mask_spec     every spec kind with its optional fields
  fuzz_qwen_config   Qwen2 and Qwen3 config.json files, rope_parameters, sliding-window layers
  fuzz_draft_config  DFlash, JetSpec and Domino drafts' config.json, sliding-window layers; a plain
                     Qwen3 config, a target layer out of range, an unknown projector
  fuzz_records       first byte = block size and vocabulary (fuzz_records.cpp), then one record:
                     a sequence, packed documents, given anchors with keep and prefix_lengths;
                     a misspelt key, an id outside the vocabulary, an anchor past the row
  fuzz_score_records first byte = vocabulary (fuzz_score_records.cpp), then one record: a
                     sequence, packed documents, a rollout group; a misspelt key, two layouts,
                     completions without a prompt, an id outside the vocabulary
  fuzz_tokenizer     '{' first: a tiny tokenizer.json (ByteLevel alone; Qwen2's NFC and Split
                     regex); anything else: text for the golden tokenizer (scripts, emoji,
                     combining marks, code, whitespace, added tokens, invalid UTF-8)
Usage:
    python3 tools/fuzz/make_seeds.py [SEEDS_DIR]   # default: tools/fuzz/seeds
"""

import json
import os
import struct
import sys

SIZES = {"BF16": 2, "F16": 2, "F32": 4, "F64": 8, "I64": 8, "I32": 4, "BOOL": 1, "U8": 1}


def safetensors(tensors, metadata=None, pad=True):
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


def shard(tokens, version):
    """An llm.c token shard: 256 int32 header (magic, version, count), then the tokens."""
    header = struct.pack("<3i", 20240520, version, len(tokens)) + bytes(4 * 253)
    return header + struct.pack(("<%dH" if version == 1 else "<%dI") % len(tokens), *tokens)


def jsonl(*records):
    return "".join(json.dumps(r) + "\n" for r in records).encode()


def safetensors_seeds():
    return {
        "one_f32.safetensors": safetensors([("w", "F32", [2, 2])], {"format": "pt"}),
        "every_dtype.safetensors": safetensors([(f"t.{d.lower()}", d, [3]) for d in SIZES],
                                               {"format": "pt", "k": "v"}),
        "scalar_and_empty.safetensors": safetensors(
            [("s", "F64", []), ("e", "F32", [0, 4]), ("b", "BF16", [1, 2, 3])], pad=False),
        "no_tensors.safetensors": safetensors([], {"format": "pt"}),
        "qwen_names.safetensors": safetensors([("model.embed_tokens.weight", "BF16", [8, 4]),
                                               ("model.layers.0.self_attn.q_proj.bias", "F16", [4]),
                                               ("lm_head.weight", "BF16", [8, 4])],
                                              {"format": "pt"}),
        # Regression: a number beyond double's range escaped as json's out_of_range.
        "number_out_of_range.safetensors": safetensors([("s", "F32", [1])])
        .replace(b'"shape":[1]', b'"shape":[1e99999]'),
    }


def readers_seeds():
    # Mode bytes: '0' documents (loss_mask form), '1' documents (labels form), '2' rollouts,
    # '3' token shard; '4'-'7' the same with skip_bad_records, '8'-'?' with vocab_size 1000.
    docs = jsonl({"input_ids": [1, 5, 7, 2]},
                 {"input_ids": [1, 9, 3, 2], "loss_mask": [0, 1, 1, 1]},
                 {"input_ids": [4, 4], "loss_mask": [True, False]})
    return {
        "documents_loss_mask": b"0" + docs,
        "documents_labels": b"9" + docs + jsonl({"input_ids": [1, 2, 3], "labels": [2, 3, -100]}),
        "documents_bad_skipped": b"4" + docs + b'{"input_ids": [1, "x"]}\n{"input_ids": [1, 2]',
        "rollouts": b"2" + jsonl({"prompt_ids": [1, 2], "completions": [[3, 4], [5]]},
                                 {"prompt_ids": [], "completions": [[7, 8, 9]]}),
        "rollouts_vocab": b":" + jsonl({"prompt_ids": [999], "completions": [[1000]]}),
        "shard_u16": b"3" + shard([0, 5, 6, 0, 7, 8, 9, 0, 3], 1),
        "shard_u32": b"?" + shard([1, 2, 0, 70000, 0], 2),
    }


def train_config_seeds():
    sft = (b"run_dir: runs/x\nmodel: {config: c.json}\n"
           b"data: {train: d.jsonl, format: documents, seq_len: 64, packing: bfd}\n"
           b"train: {max_steps: 3}\noptimizer: {lr: 1.0e-3, betas: [0.9, 0.95]}\n")
    dflash = (b"run_dir: runs/d\ntarget: {config: c.json}\n"
              b"draft: {mask_token_id: 63, num_layers: 1, block_size: 4, num_anchors: 16}\n"
              b"data: {train: d.jsonl, format: documents, seq_len: 64, packing: dflash}\n")
    rollouts = (b"run_dir: runs/r\nmodel: {path: ckpt}\n"
                b"data: {train: r.jsonl, format: rollouts, seq_len: 64, packing: fold}\n"
                b"scheduler: {warmup_ratio: 0.1, min_lr_ratio: 0.0}\n")
    return {
        "sft.yaml": b"0" + sft,
        "sft_overrides.yaml": b"0" + sft + b"%%\n--train.max_steps=7\n--optimizer.betas\n"
                                           b"[0.8, 0.9]\n--log.every_steps=2\n--seed\n5\n"
                                           b"--checkpoint.keep_last=1\n",
        "rollouts.yaml": b"0" + rollouts,
        "dflash.yaml": b"1" + dflash + b"%%\n--draft.loss_type=dflash\n",
        "domino.yaml": b"2" + dflash + b"%%\n--draft.emb_dim=8\n--draft.gru_hidden_dim\n8\n",
        "jetspec.yaml": b"3" + dflash + b"%%\n--draft.kd_temperature=2.0\n",
    }


def mask_spec_seeds():
    specs = {
        "causal.json": {"kind": "causal", "length": 37},
        "causal_window.json": {"kind": "causal", "length": 40, "sliding_window": 5},
        "documents.json": {"kind": "documents", "seq_lens": [5, 0, 12], "length": 20},
        "documents_window.json": {"kind": "documents", "seq_lens": [30, 3], "sliding_window": 4},
        "prefix_tree.json": {"kind": "prefix_tree", "node_lengths": [4, 3, 2, 5],
                             "sample_paths": [[0, 1], [0, 2, 3]]},
        "dflash.json": {"kind": "dflash", "ctx_len": 24, "block_size": 4, "anchors": [0, 7, 20],
                        "keep": [True, 0, 1]},
        "dflash_docs.json": {"kind": "dflash", "ctx_len": 24, "block_size": 3, "anchors": [2, 15],
                             "keep": [True, True], "causal": True, "seq_lens": [10, 14],
                             "sliding_window": 6},
        # Regressions: lengths whose sums overflowed int64.
        "overflow_documents.json": {"kind": "documents", "seq_lens": [2**63 - 1, 2**63 - 1]},
        "overflow_prefix_tree.json": {"kind": "prefix_tree", "node_lengths": [2**63 - 1, 1],
                                      "sample_paths": [[0, 1]]},
        "overflow_dflash.json": {"kind": "dflash", "ctx_len": 2**63 - 1, "block_size": 2**63 - 1,
                                 "anchors": [0, 0], "keep": [1, 1]},
    }
    return {name: json.dumps(spec).encode() for name, spec in specs.items()}


def qwen_config_seeds():
    qwen3 = {"model_type": "qwen3", "architectures": ["Qwen3ForCausalLM"], "vocab_size": 64,
             "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
             "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
             "rms_norm_eps": 1e-6, "rope_theta": 10000.0, "tie_word_embeddings": True,
             "max_position_embeddings": 1024, "torch_dtype": "float32"}
    qwen2 = {"model_type": "qwen2", "architectures": ["Qwen2ForCausalLM"], "vocab_size": 100,
             "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 4,
             "num_attention_heads": 4, "num_key_value_heads": 1, "use_sliding_window": True,
             "sliding_window": 8, "max_window_layers": 2, "hidden_act": "silu",
             "rope_scaling": None, "dtype": "bfloat16"}
    layers = dict(qwen3, layer_types=["sliding_attention", "full_attention"], sliding_window=4,
                  rope_parameters={"rope_type": "default", "rope_theta": 5e5}, attention_bias=True)
    configs = {"qwen3.json": qwen3, "qwen2_sliding.json": qwen2, "qwen3_layer_types.json": layers,
               # Regressions: a negative max_window_layers indexed before the layer table; a
               # huge layer count allocated it.
               "negative_max_window_layers.json": dict(qwen2, max_window_layers=-2),
               "huge_layer_count.json": dict(qwen2, num_hidden_layers=40000000000)}
    return {name: json.dumps(c, indent=1).encode() for name, c in configs.items()}


def draft_config_seeds():
    layers = {"model_type": "qwen3", "architectures": ["DFlashDraftModel"], "vocab_size": 64,
              "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 1,
              "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
              "rms_norm_eps": 1e-6, "rope_theta": 10000.0, "tie_word_embeddings": False,
              "max_position_embeddings": 1024, "dtype": "float32", "block_size": 4,
              "num_target_layers": 2}
    dflash = dict(layers, dflash_config={"block_size": 4, "mask_token_id": 63,
                                         "target_layer_ids": [0, 1], "causal": False})
    jetspec = dict(dflash, is_causal=True, dflash_config=dict(
        dflash["dflash_config"], causal=True, causal_head=True))
    domino = dict(dflash, dflash_config=dict(
        dflash["dflash_config"], projector_type="domino", emb_dim=8, gru_hidden_dim=8,
        pure_draft_prefix_len=1, shift_label=True))
    sliding = dict(dflash, use_sliding_window=True, sliding_window=4,
                   layer_types=["sliding_attention"], max_window_layers=1)
    configs = {"dflash.json": dflash, "jetspec.json": jetspec, "domino.json": domino,
               "sliding.json": sliding, "no_dflash_config.json": layers,
               "target_layer_out_of_range.json": dict(dflash, dflash_config=dict(
                   dflash["dflash_config"], target_layer_ids=[0, 5])),
               "unknown_projector.json": dict(dflash, dflash_config=dict(
                   dflash["dflash_config"], projector_type="mlp"))}
    return {name: json.dumps(c, indent=1).encode() for name, c in configs.items()}


def records_seeds():
    # Mode byte b: block size 2 + b % 16, vocabulary 64 (b < 128) or 1000; b"\x02" is 4 and 64.
    def record(mode, rec):
        return bytes([mode]) + json.dumps(rec).encode()
    ids = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]
    return {
        "sequence": record(2, {"input_ids": ids, "loss_mask": [0, 1, 1, 1, 1, 1, 1, 1, 1, 1]}),
        "documents": record(2, {"documents": [{"input_ids": [1, 2, 3]},
                                              {"input_ids": [4, 5, 6, 7],
                                               "loss_mask": [1, 1, 0, 1]}]}),
        "anchors_keep": record(2, {"input_ids": ids, "anchors": [0, 4], "keep": [True, False]}),
        "prefix_lengths": record(2, {"input_ids": ids, "anchors": [1, 5],
                                     "prefix_lengths": [1, 3]}),
        "vocab_1000": record(130, {"input_ids": [999, 0, 500]}),
        "misspelt_key": record(2, {"input_ids": [1, 2], "lossmask": [1, 1]}),
        "id_outside_vocab": record(2, {"input_ids": [1, 64]}),
        "anchor_past_row": record(2, {"input_ids": [1, 2, 3], "anchors": [9]}),
    }


def score_records_seeds():
    # Mode byte b: vocabulary 64 (b < 128) or 1000.
    def record(mode, rec):
        return bytes([mode]) + json.dumps(rec).encode()
    return {
        "sequence": record(0, {"input_ids": [1, 2, 3, 4, 5]}),
        "documents": record(0, {"documents": [[1, 2, 3], [4, 5, 6, 7]]}),
        "rollouts": record(0, {"prompt_ids": [1, 2, 3], "completions": [[4, 5], [6, 7, 8]]}),
        "vocab_1000": record(130, {"input_ids": [999, 0, 500]}),
        "misspelt_key": record(0, {"input_id": [1, 2]}),
        "two_layouts": record(0, {"input_ids": [1, 2], "documents": [[3]]}),
        "no_prompt": record(0, {"completions": [[1, 2]]}),
        "id_outside_vocab": record(0, {"documents": [[1, 64]]}),
    }


def tokenizer_seeds():
    vocab = {"a": 0, "b": 1, "c": 2, "ab": 3, "\u0120": 4}
    added = [{"id": 5, "content": "<|x|>", "special": True, "lstrip": True, "rstrip": False,
              "normalized": False, "single_word": False}]
    byte_level = {"model": {"type": "BPE", "vocab": vocab, "merges": ["a b"]},
                  "normalizer": None,
                  "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False},
                  "decoder": {"type": "ByteLevel"}, "added_tokens": added}
    split = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"
             r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
    qwen = dict(byte_level, normalizer={"type": "NFC"}, pre_tokenizer={
        "type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": split}, "behavior": "Isolated",
             "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False,
             "use_regex": False}]})
    texts = {
        "text_latin.txt": "Hello world, it's 2026! Numbers 1234567 and 3.14159",
        "text_scripts.txt": "\u4eca\u5929\u661f\u671f\u4e09 \u0645\u0631\u062d\u0628\u0627 "
                            "\u041f\u0440\u0438\u0432\u0435\u0442 \u0928\u092e\u0938\u094d\u0924\u0947 "
                            "H\u00e0 N\u1ed9i",
        "text_emoji.txt": "\U0001f44d\U0001f3fd \U0001f469\u200d\U0001f4bb \u2764\ufe0f flags "
                          "\U0001f1eb\U0001f1f7",
        "text_combining.txt": "cafe\u0301 \u212b A\u030a \u1100\u1161\u11a8 e\u0301\u0302",
        "text_code.txt": "def f(x):\n    return x  # code\n\tif (a != b) { c[i] += 1; }\n",
        "text_whitespace.txt": "  leading\u00a0nbsp\u3000ideographic   runs\r\n\n\n end   ",
        "text_added_tokens.txt": "fill  <|mask|>  here <|im_start|>user\nhi<|im_end|>\n<think>",
    }
    seeds = {"tiny_bytelevel.json": json.dumps(byte_level).encode(),
             "tiny_split_nfc.json": json.dumps(qwen).encode()}
    seeds.update({name: text.encode() for name, text in texts.items()})
    seeds["text_invalid_utf8.txt"] = (b"bad \xc3\x28 utf8 \xed\xa0\x80 and \xf0\x9f\x98 cut, "
                                      b"\xf4\x90\x80\x80 high \xff\xfe")
    return seeds


def main(out_dir):
    targets = {"fuzz_safetensors": safetensors_seeds(), "fuzz_readers": readers_seeds(),
               "fuzz_train_config": train_config_seeds(), "fuzz_mask_spec": mask_spec_seeds(),
               "fuzz_qwen_config": qwen_config_seeds(), "fuzz_tokenizer": tokenizer_seeds(),
               "fuzz_draft_config": draft_config_seeds(), "fuzz_records": records_seeds(),
               "fuzz_score_records": score_records_seeds()}
    for target, seeds in targets.items():
        os.makedirs(os.path.join(out_dir, target), exist_ok=True)
        for name, data in seeds.items():
            with open(os.path.join(out_dir, target, name), "wb") as f:
                f.write(data)
        print(f"{len(seeds)} seeds written to {os.path.join(out_dir, target)}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "seeds"))
