#!/usr/bin/env python3
"""Writes drafts saved the way the reference implementation (NVIDIA-NeMo/Automodel) saves them,
and the block logits its own modules compute on them, for sprig's import tests.

For each recipe (DFlash, Domino, JetSpec) the draft is built on the tiny target
tests/golden/qwen3_tiny (read only) by the reference's own classes: the draft class its registry
resolves for a Qwen3 target, the recipe's `_build_dflash_config` (JetSpec stamps
`dflash_config.causal: true`, Domino adds its head's keys) and the top-level keys its setup
stamps (`architectures: ["Qwen3DFlashDraftModel"]`, `is_causal: false` on every kind). It is
saved by the reference's checkpoint path: `_save_generated_hf_assets` writes config.json
(`to_json_string(use_diff=False)`), and the draft's state dict goes to model.safetensors under
its own names. The weights are the reference's initialisation scaled
up (so the logits are far from uniform).

The expected values come from the reference's trainer modules (DFlashTrainerModule,
DominoTrainerModule, JetSpecTrainerModule) in float64 with dense (eager) attention, on the rows
and anchors of the `unpacked` case of tests/golden/dflash_tiny_expected.safetensors: the target
hidden states captured by the reference's HFDFlashTargetModel, the block logits the draft's
slots get (Domino: after the correction head), and the loss.

Writes:
    tests/golden/reference_drafts/{dflash,domino,jetspec}/   config.json, model.safetensors (F32)
    tests/golden/reference_drafts_expected.safetensors       "<kind>.logits" [B*N*bs, V] and
        "<kind>.loss" (F64); metadata "cases" (each kind's trainer settings), "rows" and
        "reference_commit" (the reference checkout's commit).

The committed files were made with the reference at REFERENCE_COMMIT (below; their metadata
predates the "reference_commit" key). A checkout at another commit is used with a warning.

Regenerate (PyTorch and transformers from PyPI; the reference from its repository):
    git clone https://github.com/NVIDIA-NeMo/Automodel /tmp/automodel
    git -C /tmp/automodel checkout 36044ad3d139363fb6c73c24af2e7c6b65ec52f6
    python3 -m venv /tmp/venv-ref
    /tmp/venv-ref/bin/pip install torch transformers safetensors datasets torchdata torchao
    /tmp/venv-ref/bin/python tests/golden/make_reference_drafts.py --automodel /tmp/automodel
"""

import argparse
import json
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
KINDS = ("dflash", "domino", "jetspec")
REFERENCE_COMMIT = "36044ad3d139363fb6c73c24af2e7c6b65ec52f6"  # NVIDIA-NeMo/Automodel, 2026-08-22
SCALE = 10.0  # the reference initialises linears with std 0.02: scaled to 0.2
GAMMA, LAMBDA_BASE, KD_TEMPERATURE = 7.0, 0.3, 1.0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--automodel", required=True, help="a checkout of NVIDIA-NeMo/Automodel")
    args = ap.parse_args()
    commit = subprocess.run(["git", "-C", args.automodel, "rev-parse", "HEAD"], check=True,
                            capture_output=True, text=True).stdout.strip()
    if commit != REFERENCE_COMMIT:
        print(f"warning: the reference is at {commit}, the committed fixtures at "
              f"{REFERENCE_COMMIT}", file=sys.stderr)
    sys.path.insert(0, os.path.abspath(args.automodel))
    # The recipes import the LoRA kernels, written against another triton release; without
    # triton they take their fallback (nothing here runs a kernel).
    sys.modules["triton"] = None

    import torch
    from safetensors.torch import load_file, save_file
    from transformers import AutoConfig, AutoModelForCausalLM
    from transformers.models.qwen3.configuration_qwen3 import Qwen3Config

    from nemo_automodel.components.checkpoint.addons import _save_generated_hf_assets
    from nemo_automodel.components.speculative.dflash.core import DFlashTrainerModule
    from nemo_automodel.components.speculative.dflash.domino_core import DominoTrainerModule
    from nemo_automodel.components.speculative.dflash.jetspec_core import JetSpecTrainerModule
    from nemo_automodel.components.speculative.dflash.registry import resolve_dflash_draft_spec
    from nemo_automodel.components.speculative.dflash.target import (HFDFlashTargetModel,
                                                                     resolve_text_config)
    from nemo_automodel.recipes.llm.train_dflash import (TrainDFlashRecipe,
                                                         _project_onto_qwen3_config_keys)
    from nemo_automodel.recipes.llm.train_domino import TrainDominoRecipe
    from nemo_automodel.recipes.llm.train_jetspec import TrainJetSpecRecipe

    torch.set_num_threads(1)
    os.chdir(HERE)  # the configs record the target's path as given: "qwen3_tiny"
    target_dir = "qwen3_tiny"
    golden = load_file(os.path.join(HERE, "dflash_tiny_expected.safetensors"))
    rows = {k: golden["unpacked." + k] for k in ("input_ids", "loss_mask", "anchors", "keep")}
    block_size, mask_token_id, layer_ids, draft_layers = 4, 95, [0, 1], 2

    target = AutoModelForCausalLM.from_pretrained(target_dir, dtype=torch.float64,
                                                  attn_implementation="eager")
    captured = HFDFlashTargetModel(target, layer_ids, capture_logits=True).generate_batch(
        rows["input_ids"], torch.ones_like(rows["input_ids"]), rows["loss_mask"])
    target_config = AutoConfig.from_pretrained(target_dir)
    draft_cls = resolve_dflash_draft_spec(target_config.architectures).draft_cls
    text_config = resolve_text_config(target_config)

    recipes = {"dflash": TrainDFlashRecipe, "domino": TrainDominoRecipe,
               "jetspec": TrainJetSpecRecipe}
    recipe_args = {"domino": {"emb_dim": 16, "gru_hidden_dim": 12, "pure_draft_prefix_len": 1,
                              "shift_label": True}}
    expected, cases = {}, {}
    for kind in KINDS:
        # The draft config as the recipe's setup builds it.
        recipe = recipes[kind].__new__(recipes[kind])
        recipe.block_size, recipe.mask_token_id = block_size, mask_token_id
        config = _project_onto_qwen3_config_keys(text_config.to_dict())
        config.update({
            "architectures": [draft_cls.__name__], "model_type": "qwen3",
            "num_hidden_layers": draft_layers, "layer_types": ["full_attention"] * draft_layers,
            "sliding_window": None, "use_sliding_window": False,
            "max_window_layers": draft_layers, "is_causal": False,
            "num_target_layers": text_config.num_hidden_layers, "block_size": block_size,
            "dflash_config": recipe._build_dflash_config(recipe_args.get(kind, {}), layer_ids),
        })
        draft_config = Qwen3Config.from_dict(config)
        draft_config._attn_implementation = "eager"
        torch.manual_seed(1000 + KINDS.index(kind))
        draft = draft_cls(draft_config).to(torch.float32)
        with torch.no_grad():
            for name, p in draft.named_parameters():
                if p.dim() == 2 and not name.startswith("prefix_gru"):
                    p.mul_(SCALE)

        # The reference's save: generated HF assets, then the draft's own state dict.
        out_dir = os.path.join(HERE, "reference_drafts", kind)
        shutil.rmtree(out_dir, ignore_errors=True)
        os.makedirs(out_dir)
        _save_generated_hf_assets(draft, None, out_dir, tokenizer=None, v4_compatible=False,
                                  save_custom_model_code=False)
        weights = os.path.join(out_dir, "model.safetensors")
        save_file({k: v.contiguous() for k, v in draft.state_dict().items()}, weights,
                  metadata={"format": "pt"})
        os.chmod(weights, 0o644)

        # Its block logits under the reference's trainer module, in float64, anchors given.
        draft = draft.to(torch.float64)
        common = dict(draft_model=draft, target_lm_head=target.get_output_embeddings(),
                      target_embed_tokens=target.get_input_embeddings(),
                      mask_token_id=mask_token_id, block_size=block_size,
                      attention_backend="eager", num_anchors=8)
        inputs = dict(input_ids=rows["input_ids"], hidden_states=captured.hidden_states,
                      loss_mask=rows["loss_mask"])
        if kind == "dflash":
            module = DFlashTrainerModule(loss_decay_gamma=GAMMA, **common)
        elif kind == "domino":
            module = DominoTrainerModule(loss_decay_gamma=GAMMA, shift_label=True, **common)
            inputs["lambda_base"] = LAMBDA_BASE
        else:
            module = JetSpecTrainerModule(kd_temperature=KD_TEMPERATURE, **common)
            inputs["target_logits"] = captured.logits
        module._sample_anchor_positions = lambda *a, **k: (rows["anchors"], rows["keep"].bool())
        seen = {}
        lm_head = target.get_output_embeddings()
        object.__setattr__(module, "lm_head",
                           lambda h: seen.setdefault("base", lm_head(h)))
        if kind == "domino":
            apply_head = module._apply_domino_head
            module._apply_domino_head = lambda *a, **k: seen.setdefault("final",
                                                                        apply_head(*a, **k))
        with torch.no_grad():
            metrics = module(**inputs)
        logits = seen["final"] if kind == "domino" else seen["base"]
        expected[kind + ".logits"] = logits.reshape(-1, logits.shape[-1]).double().contiguous()
        expected[kind + ".loss"] = metrics.loss.detach().double().reshape(1)
        cases[kind] = {"gamma": GAMMA, "lambda_base": LAMBDA_BASE,
                       "kd_temperature": KD_TEMPERATURE}
        print(f"{kind}: loss {metrics.loss.item():.6f}, logits {tuple(logits.shape)}")

    path = os.path.join(HERE, "reference_drafts_expected.safetensors")
    save_file(expected, path, metadata={"cases": json.dumps(cases),
                                        "rows": "dflash_tiny_expected.safetensors, case unpacked",
                                        "reference_commit": commit})
    os.chmod(path, 0o644)


if __name__ == "__main__":
    main()
