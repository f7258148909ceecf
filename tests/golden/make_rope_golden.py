#!/usr/bin/env python3
"""Writes the RoPE-scaling fixtures: transformers' own frequencies and logits for every rope type
sprig computes, on the tiny Qwen3 model of tests/golden/qwen3_tiny (read only).

Each case sets `rope_parameters` on a copy of qwen3_tiny's config (head_dim 64,
max_position_embeddings 128) and runs transformers' Qwen3ForCausalLM in float32 (eager
attention) on the same ids, at positions offset by the case's `position_offset`, so the rows reach
far into the scaled range (the long dynamic case passes max_position_embeddings, where its base
grows). Recorded per case: the rotary embedding's inv_freq and attention_scaling after the forward
(what transformers rotated by) and the logits. The GENERATE cases also record transformers' greedy
`generate` from the first row (positions from 0, past max_position_embeddings: the dynamic base
grows while decoding with the KV cache); the TRAIN cases the mean next-token loss of the offset
rows and the gradients of layer 0's query and key projections.

Writes tests/golden/rope_expected.safetensors: "input_ids" [2, 13] (I64) and per case
"<case>.inv_freq" [32], "<case>.attention_scaling" [1], "<case>.logits" [2, 13, 96] (F32);
"<case>.greedy" [130] (I64) per GENERATE case, "<case>.loss" [1] and "<case>.grad.<parameter>" per
TRAIN case (F32); metadata "cases" maps each case to its rope_parameters, position_offset and top-level config keys,
"transformers" is the version that made them (5.x: its YaRN factor rule is sprig's).

Regenerate (PyTorch and transformers from PyPI):
    python3 -m venv /tmp/venv-hf
    /tmp/venv-hf/bin/pip install torch transformers safetensors
    /tmp/venv-hf/bin/python tests/golden/make_rope_golden.py
"""

import json
import os

import torch
import transformers
from safetensors.torch import load_file
from transformers import Qwen3Config, Qwen3ForCausalLM

from make_qwen_golden import HERE, save_safetensors

CASES = {
    "linear": ({"rope_type": "linear", "factor": 2.0}, 100),
    "dynamic_short": ({"rope_type": "dynamic", "factor": 2.0}, 100),
    "dynamic_long": ({"rope_type": "dynamic", "factor": 2.0}, 290),
    "yarn": ({"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32}, 100),
    "yarn_mscale": ({"rope_type": "yarn", "factor": 8.0, "original_max_position_embeddings": 16,
                     "mscale": 1.0, "mscale_all_dim": 0.5, "beta_fast": 16.0, "beta_slow": 2.0,
                     "truncate": False}, 110),
    "yarn_attention_factor": ({"rope_type": "yarn", "factor": 4.0, "attention_factor": 1.5,
                               "original_max_position_embeddings": 32}, 60),
    "llama3": ({"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                "high_freq_factor": 4.0, "original_max_position_embeddings": 64}, 100),
    # transformers 5 (as 4.56-4.57, vLLM and SGLang) takes an explicit factor as given; 4.51-4.55
    # replaced it by max_position_embeddings / original_max_position_embeddings (4 here).
    "yarn_explicit_factor": ({"rope_type": "yarn", "factor": 2.0,
                              "original_max_position_embeddings": 32}, 100),
    # A null factor is that ratio (transformers 5).
    "yarn_null_factor": ({"rope_type": "yarn", "factor": None,
                          "original_max_position_embeddings": 32}, 100),
}

# Keys set at the top level of a case's config (transformers 5 reads a top-level
# original_max_position_embeddings before rope_parameters').
TOP_LEVEL = {
    "yarn_top_level_original": ({"rope_type": "yarn", "factor": 8.0}, 110,
                                {"original_max_position_embeddings": 16}),
}


# Greedy decoding: the prompt is the first row of input_ids; the smallest gap between the two best
# logits of any step is printed (it must stay far above the logits' agreement, about 1e-5).
GENERATE = ("linear", "dynamic_short", "yarn", "llama3")
NEW_TOKENS = 130
TRAIN = ("dynamic_long", "yarn")
TRAIN_GRADS = ("model.layers.0.self_attn.q_proj.weight", "model.layers.0.self_attn.k_proj.weight")


def greedy(model, prompt):
    out = model.generate(prompt, max_new_tokens=NEW_TOKENS, do_sample=False, eos_token_id=None,
                         pad_token_id=0, output_logits=True, return_dict_in_generate=True)
    gap = min((lambda top: (top[0] - top[1]).item())(torch.topk(step[0], 2).values)
              for step in out.logits)
    return out.sequences[0, prompt.shape[1]:].clone(), gap


def main():
    torch.set_num_threads(1)
    with open(os.path.join(HERE, "qwen3_tiny", "config.json")) as f:
        base = json.load(f)
    weights = load_file(os.path.join(HERE, "qwen3_tiny", "model.safetensors"))
    gen = torch.Generator().manual_seed(77)
    ids = torch.randint(0, base["vocab_size"], (2, 13), generator=gen)
    out, cases = {"input_ids": ids}, {}
    every_case = {name: (params, offset, {}) for name, (params, offset) in CASES.items()}
    every_case.update(TOP_LEVEL)
    for name, (params, offset, top_level) in every_case.items():
        cfg = dict(base)
        cfg.pop("rope_theta", None)
        cfg["rope_parameters"] = {"rope_theta": base["rope_theta"], **params}
        cfg.update(top_level)
        config = Qwen3Config(**cfg)
        config._attn_implementation = "eager"
        model = Qwen3ForCausalLM(config).eval()
        missing, unexpected = model.load_state_dict(weights, strict=False)
        assert not unexpected and all("rotary_emb" in k for k in missing), (missing, unexpected)
        pos = (torch.arange(13) + offset).expand(2, 13)
        if name in TRAIN:
            logits = model(input_ids=ids, position_ids=pos).logits
            loss = torch.nn.functional.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]),
                                                     ids[:, 1:].reshape(-1))
            loss.backward()
            params = dict(model.named_parameters())
            out[name + ".loss"] = loss.detach().reshape(1)
            out.update({f"{name}.grad.{p}": params[p].grad.clone() for p in TRAIN_GRADS})
            logits = logits.detach()
        else:
            with torch.no_grad():
                logits = model(input_ids=ids, position_ids=pos).logits
        rotary = model.model.rotary_emb
        inv_freq, attention_scaling = rotary.inv_freq.detach().float().clone(), rotary.attention_scaling
        if name in GENERATE:
            out[name + ".greedy"], gap = greedy(model, ids[:1])
            print(f"{name}: greedy, smallest top-2 gap {gap:.2e}")
            rotary.inv_freq, rotary.attention_scaling = inv_freq, attention_scaling
        out[name + ".inv_freq"] = inv_freq
        out[name + ".attention_scaling"] = torch.tensor([float(attention_scaling)])
        out[name + ".logits"] = logits.float()
        cases[name] = {"rope_parameters": cfg["rope_parameters"], "position_offset": offset,
                       "top_level": top_level}
        print(f"{name}: attention_scaling {float(attention_scaling):.6f}, "
              f"inv_freq[-1] {inv_freq[-1].item():.6e}")
    save_safetensors(os.path.join(HERE, "rope_expected.safetensors"), out,
                     {"cases": json.dumps(cases), "transformers": transformers.__version__,
                      "torch": torch.__version__})


if __name__ == "__main__":
    main()
