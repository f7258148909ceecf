#!/usr/bin/env python3
"""Writes EAGLE-3 drafts saved the way the reference implementation's recipe (NVIDIA-NeMo/Automodel,
recipes/llm/train_eagle3.py) saves them, and what its own trainer module computes on them, for
sprig's import and parity tests.

The target is a small random Qwen3 of 8 layers (so the reference's default aux layers
[1, L/2 - 1, L - 4] = [1, 3, 4] apply), written once as tests/golden/reference_eagle3/target. For
each case the draft is built by the reference's own classes as its recipe's setup builds it: the
draft class its registry resolves for a Qwen3 target, over the target's config with the keys the
setup stamps (draft_vocab_size, target_hidden_size, architectures ["LlamaEagle3DraftModel"],
tie_word_embeddings false, attn_implementation eager, fc_norm / norm_output / parallel_drafting
false), its embedding copied from the target and frozen, and its vocabulary map set
(set_vocab_mapping) from draft ids ordered by frequency, as the reference builds them (not
ascending). It is saved as the recipe's consolidated export: <case>/model/consolidated/
config.json (to_json_string(use_diff=False)), model-00001-of-00001.safetensors under the draft's
own state-dict names (model.fc, model.layers.0, model.norm, lm_head, model.embed_tokens, d2t,
t2d) and model.safetensors.index.json. The weights are the reference's initialisation scaled up
(so the logits are far from uniform), and four ids weigh more in the target's head and each draft's
(so the argmaxes often agree and the chain counts are not all zero).

The expected values come from the reference's Eagle3TrainerModule in float64 with eager attention
on the target batch its HFEagle3TargetModel captures (aux layers [1, 3, 4], shifted logits, input
ids and loss mask; packed rows with seq_lens, position_ids and doc_remaining): loss, accuracy,
valid_tokens, step_prefix_hits, step_valid and the gradient of the loss for every trainable draft
parameter, under the reference's names.

Writes:
    tests/golden/reference_eagle3/target/                 config.json, model.safetensors (F32)
    tests/golden/reference_eagle3/<case>/model/consolidated/   the draft as above (F32)
    tests/golden/reference_eagle3_expected.safetensors    "<case>.<name>": the rows (I64) and the
        values above (F64); metadata "cases" (each case's rows, ttt_steps and vocabulary) and
        "reference_commit".

Regenerate (PyTorch and transformers from PyPI; the reference from its repository):
    git clone https://github.com/NVIDIA-NeMo/Automodel /tmp/automodel
    git -C /tmp/automodel checkout 36044ad3d139363fb6c73c24af2e7c6b65ec52f6
    python3 -m venv /tmp/venv-ref
    /tmp/venv-ref/bin/pip install torch transformers safetensors
    /tmp/venv-ref/bin/python tests/golden/make_eagle3_reference.py --automodel /tmp/automodel
"""

import argparse
import json
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "reference_eagle3")
REFERENCE_COMMIT = "36044ad3d139363fb6c73c24af2e7c6b65ec52f6"  # NVIDIA-NeMo/Automodel, 2026-08-22
SCALE = 8.0  # the reference initialises linears with std 0.02: scaled to 0.16
TTT_STEPS = 3
TARGET = {"model_type": "qwen3", "architectures": ["Qwen3ForCausalLM"], "vocab_size": 96,
          "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 8,
          "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
          "rms_norm_eps": 1e-6, "rope_theta": 10000.0, "tie_word_embeddings": False,
          "attention_bias": False, "hidden_act": "silu", "max_position_embeddings": 128,
          "initializer_range": 0.02, "torch_dtype": "float32"}


def rows_of(case, gen, torch):
    """The case's rows: ids below the vocabulary, a loss mask with gaps, packed documents."""
    B, S = case["rows"], case["seq_len"]
    ids = torch.randint(0, TARGET["vocab_size"], (B, S), generator=gen)
    loss_mask = (torch.rand(B, S, generator=gen) < 0.8).long()
    rows = {"input_ids": ids, "loss_mask": loss_mask,
            "attention_mask": torch.ones(B, S, dtype=torch.long)}
    if "doc_lens" in case:
        lens = case["doc_lens"]
        assert sum(lens) == S and B == 1
        rows["position_ids"] = torch.tensor([[t for n in lens for t in range(n)]])
        rows["doc_remaining"] = torch.tensor([[n - 1 - t for n in lens for t in range(n)]])
        rows["seq_lens"] = torch.tensor([lens])
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--automodel", required=True, help="a checkout of NVIDIA-NeMo/Automodel")
    args = ap.parse_args()
    try:
        commit = subprocess.run(["git", "-C", args.automodel, "rev-parse", "HEAD"], check=True,
                                capture_output=True, text=True).stdout.strip()
    except (subprocess.CalledProcessError, FileNotFoundError):
        commit = REFERENCE_COMMIT  # an exported tree: taken to be the pinned commit
        print(f"note: {args.automodel} is no git checkout; recording {commit}", file=sys.stderr)
    if commit != REFERENCE_COMMIT:
        print(f"warning: the reference is at {commit}, the committed fixtures at "
              f"{REFERENCE_COMMIT}", file=sys.stderr)
    sys.path.insert(0, os.path.abspath(args.automodel))
    sys.modules["triton"] = None  # the LoRA kernels' fallback; nothing here runs a kernel

    import torch
    from safetensors.torch import save_file
    from transformers import AutoModelForCausalLM
    from transformers.models.qwen3.configuration_qwen3 import Qwen3Config
    from transformers.models.qwen3.modeling_qwen3 import Qwen3ForCausalLM

    from nemo_automodel.components.speculative.eagle.core import Eagle3TrainerModule
    from nemo_automodel.components.speculative.eagle.registry import resolve_eagle3_draft_spec
    from nemo_automodel.components.speculative.eagle.target import HFEagle3TargetModel

    torch.set_num_threads(1)
    shutil.rmtree(OUT, ignore_errors=True)
    os.makedirs(OUT)

    # The target: random, saved in f32 and read back in f64 (sprig reads the same file).
    torch.manual_seed(77)
    target_config = Qwen3Config.from_dict(TARGET)
    target = Qwen3ForCausalLM(target_config).to(torch.float32)
    with torch.no_grad():
        for p in target.parameters():
            if p.dim() == 2:
                p.mul_(SCALE)
    # A few favoured ids the target's head (and each draft's) leans to, so that the draft's argmax
    # often agrees with the target's and the chain counts are not all zero.
    gen = torch.Generator().manual_seed(5)
    V = TARGET["vocab_size"]
    by_frequency = torch.randperm(V, generator=gen)[:40]  # the reference's order, not ascending
    favoured = by_frequency[:4]
    with torch.no_grad():
        target.lm_head.weight[favoured] *= 4
    target_dir = os.path.join(OUT, "target")
    target.save_pretrained(target_dir, safe_serialization=True)
    target = AutoModelForCausalLM.from_pretrained(target_dir, dtype=torch.float64,
                                                  attn_implementation="eager")
    aux_layer_ids = [1, 3, 4]
    backend = HFEagle3TargetModel(target, aux_layer_ids)
    assert backend.aux_layer_ids == aux_layer_ids

    cases = {
        "unpacked": {"rows": 2, "seq_len": 16, "vocab": None},
        "packed_reduced": {"rows": 1, "seq_len": 24, "doc_lens": [10, 14],
                           "vocab": by_frequency.tolist()},
    }
    draft_cls = resolve_eagle3_draft_spec(target_config.architectures).draft_cls
    expected = {}
    for index, (name, case) in enumerate(cases.items()):
        selected = (torch.arange(V) if case["vocab"] is None
                    else torch.tensor(case["vocab"], dtype=torch.long))
        selected_mask = torch.zeros(V, dtype=torch.bool)
        selected_mask[selected] = True

        # The draft as the recipe's setup builds it.
        config = target_config.to_dict()
        config["draft_vocab_size"] = int(selected.numel())
        config["target_hidden_size"] = target_config.hidden_size
        config["architectures"] = ["LlamaEagle3DraftModel"]
        config["tie_word_embeddings"] = False
        config["attn_implementation"] = "eager"
        config["fc_norm"] = False
        config["norm_output"] = False
        config["parallel_drafting"] = False
        draft_config = type(target_config).from_dict(config)
        torch.manual_seed(1000 + index)
        draft = draft_cls(draft_config).to(torch.float32)
        with torch.no_grad():
            for pname, p in draft.named_parameters():
                if p.dim() == 2 and "embed_tokens" not in pname:
                    p.mul_(SCALE)
            draft_ids = {int(t): i for i, t in enumerate(selected)}
            draft.lm_head.weight[[draft_ids[int(t)] for t in favoured]] *= 4
        draft.copy_embeddings_from_target(target.get_input_embeddings())
        draft.set_vocab_mapping(selected)
        draft.freeze_embeddings()

        # The recipe's consolidated export.
        files = os.path.join(OUT, name, "model", "consolidated")
        os.makedirs(files)
        with open(os.path.join(files, "config.json"), "w") as f:
            f.write(draft.config.to_json_string(use_diff=False))
        state = {k: v.contiguous() for k, v in draft.state_dict().items()}
        shard = "model-00001-of-00001.safetensors"
        save_file(state, os.path.join(files, shard), metadata={"format": "pt"})
        with open(os.path.join(files, "model.safetensors.index.json"), "w") as f:
            json.dump({"metadata": {}, "weight_map": {k: shard for k in sorted(state)}}, f,
                      indent=2)

        # Its loss, metrics and gradients under the reference's trainer module, in float64.
        rows = rows_of(case, gen, torch)
        draft = draft.to(torch.float64)
        packing = {k: rows[k] for k in ("position_ids", "seq_lens", "doc_remaining") if k in rows}
        batch = backend.generate_batch(rows["input_ids"], rows["attention_mask"],
                                       rows["loss_mask"], **packing)
        module = Eagle3TrainerModule(draft, selected_token_ids=selected,
                                     selected_token_mask=selected_mask, ttt_steps=TTT_STEPS)
        metrics = module(**batch.to_trainer_inputs())
        metrics.loss.backward()
        for key in ("input_ids", "loss_mask") + tuple(packing):
            expected[f"{name}.{key}"] = rows[key].long().contiguous()
        for key in ("loss", "accuracy", "valid_tokens", "step_prefix_hits", "step_valid"):
            expected[f"{name}.{key}"] = getattr(metrics, key).detach().double().reshape(-1)
        for pname, p in draft.named_parameters():
            if p.requires_grad:
                expected[f"{name}.grad.{pname}"] = p.grad.detach().double().contiguous()
        case["ttt_steps"] = TTT_STEPS
        print(f"{name}: loss {metrics.loss.item():.6f}, accuracy {metrics.accuracy.item():.4f}, "
              f"prefix hits {metrics.step_prefix_hits.tolist()} of {metrics.step_valid.tolist()}")

    path = os.path.join(HERE, "reference_eagle3_expected.safetensors")
    save_file(expected, path, metadata={"cases": json.dumps(cases), "reference_commit": commit})
    for root, _, names in os.walk(OUT):
        for n in names:
            os.chmod(os.path.join(root, n), 0o644)
    os.chmod(path, 0o644)


if __name__ == "__main__":
    main()
