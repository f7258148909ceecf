#!/usr/bin/env python3
"""One DFlash draft training step on the CPU: sprig against PyTorch.

Builds the CPU yardstick Qwen3 target of qwen_step_vs_torch.py and a one-layer DFlash draft on it
(block size 16, the target's attention shape, fed by target layer 2) with random weights, writes
both as Hugging Face checkpoints plus the token ids, loss mask and anchors to a temporary
directory, and times one step of each on the same threads: the frozen target's capture of the
chosen layer, the draft forward over every anchor's block, the decay-weighted dflash loss
(gamma 7) and the backward into the draft's parameters. The PyTorch side is a float32
re-implementation of tests/golden/make_dflash_golden.py on PyTorch's scaled dot-product
attention; `sprig bench draft-step` runs sprig's. Prints both losses (they must agree), both
median step times and the speed ratio (target: sprig >= 1.0x), and the ratio of process CPU time
per step, which other jobs on a shared machine disturb less.

Usage (Debian's python3-torch with libopenblas0-pthread; step_compare.py refuses the reference BLAS):
    /usr/bin/python3 tools/bench/draft_step_vs_torch.py --sprig build/tools/sprig
"""

import argparse
import json
import os
import sys
import tempfile

from qwen_step_vs_torch import CONFIG
from step_compare import import_torch, report, sprig_step, time_torch_steps

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

B, S, N = 2, 512, 32            # rows, tokens per row, anchors per row (all kept)
UNSUPERVISED = 16               # leading tokens of each row with loss_mask 0
BLOCK_SIZE, GAMMA = 16, 7.0
MASK_ID = CONFIG["vocab_size"] - 1  # the last id; the inputs never contain it
TARGET_LAYER_IDS = [CONFIG["num_hidden_layers"] // 2]  # the default for one draft layer

DRAFT_CFG = {
    "architectures": ["DFlashDraftModel"], "model_type": "qwen3",
    "vocab_size": CONFIG["vocab_size"], "hidden_size": CONFIG["hidden_size"],
    "intermediate_size": CONFIG["intermediate_size"], "num_hidden_layers": 1,
    "num_attention_heads": CONFIG["num_attention_heads"],
    "num_key_value_heads": CONFIG["num_key_value_heads"], "head_dim": CONFIG["head_dim"],
    "rms_norm_eps": CONFIG["rms_norm_eps"], "rope_theta": CONFIG["rope_theta"],
    "rope_parameters": {"rope_theta": CONFIG["rope_theta"], "rope_type": "default"},
    "tie_word_embeddings": False, "attention_bias": False, "hidden_act": "silu",
    "max_position_embeddings": 4096, "initializer_range": 0.02, "block_size": BLOCK_SIZE,
    "num_target_layers": CONFIG["num_hidden_layers"], "layer_types": ["full_attention"],
    "use_sliding_window": False, "sliding_window": None, "max_window_layers": 1,
    "is_causal": False, "dtype": "float32",
    "dflash_config": {"block_size": BLOCK_SIZE, "mask_token_id": MASK_ID,
                      "target_layer_ids": TARGET_LAYER_IDS, "causal": False},
}


def attention(torch, q, k, v, mask):
    """q [B, nH, Q, D], k and v [B, nKV, K, D]; mask bool [B, 1, Q, K] (True: attend), None:
    causal. GQA by repeating the K/V heads."""
    F = torch.nn.functional
    groups = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(groups, dim=1), v.repeat_interleave(groups, dim=1)
    if hasattr(F, "scaled_dot_product_attention"):  # PyTorch >= 2.0
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=mask is None)
    return F._scaled_dot_product_attention(q, k, v, mask, 0.0, False, mask is None)[0]  # 1.13


def layer(torch, qwen, cfg, p, pre, h, ctx, pos_q, pos_k, mask):
    """One Qwen3 decoder layer, as make_dflash_golden.layer: queries from norm(h) [B, Q, H], keys
    and values from [ctx | norm(h)] (ctx None: the target's causal self-attention)."""
    F = torch.nn.functional
    (rows, Q, _), D = h.shape, qwen.head_dim(cfg)
    nH, nKV = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    eps, theta = cfg["rms_norm_eps"], cfg["rope_theta"]

    def w(name):
        return p[pre + name + ".weight"]

    x = qwen.rms_norm(h, w("input_layernorm"), eps)
    src = x if ctx is None else torch.cat([ctx, x], dim=1)
    q = F.linear(x, w("self_attn.q_proj")).view(rows, Q, nH, D)
    k = F.linear(src, w("self_attn.k_proj")).view(rows, -1, nKV, D)
    v = F.linear(src, w("self_attn.v_proj")).view(rows, -1, nKV, D)
    q = qwen.rope(qwen.rms_norm(q, w("self_attn.q_norm"), eps), pos_q, theta)
    k = qwen.rope(qwen.rms_norm(k, w("self_attn.k_norm"), eps), pos_k, theta)
    a = attention(torch, q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), mask)
    h = h + F.linear(a.transpose(1, 2).reshape(rows, Q, nH * D), w("self_attn.o_proj"))
    y = qwen.rms_norm(h, w("post_attention_layernorm"), eps)
    gate, up = F.linear(y, w("mlp.gate_proj")), F.linear(y, w("mlp.up_proj"))
    return h + F.linear(F.silu(gate) * up, w("mlp.down_proj"))


def make_batch(torch, dflash, inputs):
    """The step's tensors from the inputs, by make_dflash_golden's block helpers: noise ids,
    context, draft and key positions, the DFlash mask, block targets and loss weights."""
    ids, loss_mask, anchors, keep = (inputs[k] for k in ["input_ids", "loss_mask", "anchors",
                                                         "keep"])
    dflash.MASK = MASK_ID  # block_inputs shows the module's mask token in the masked slots
    ctx_pos = torch.arange(S).expand(B, S)
    draft_pos = (anchors[..., None] + torch.arange(BLOCK_SIZE)).flatten(1)
    targets, block_mask = dflash.block_targets(ids, loss_mask, anchors, keep, BLOCK_SIZE)
    decay = torch.exp(-torch.arange(BLOCK_SIZE - 1, dtype=torch.float64) / GAMMA)
    return {"input_ids": ids, "ctx_pos": ctx_pos, "draft_pos": draft_pos,
            "full_pos": torch.cat([ctx_pos, draft_pos], dim=1),
            "noise": dflash.block_inputs(ids, anchors, keep, BLOCK_SIZE).flatten(1),
            "allowed": dflash.dflash_mask(S, BLOCK_SIZE, anchors, keep)[:, None],
            "targets": targets, "weights": (block_mask[:, :, 1:] * decay).float()}


def draft_loss(torch, qwen, tp, dp, batch):
    """The step's loss: the target's residual stream after TARGET_LAYER_IDS (no grad; layers past
    the deepest one are skipped), the draft over every block, the target's head on the supervised
    slots 1..bs-1, sum(nll * w) / (sum(w) + 1e-6) with w = exp(-(k - 1) / gamma) * block_mask."""
    F, eps = torch.nn.functional, CONFIG["rms_norm_eps"]
    with torch.no_grad():
        x, caps = tp["model.embed_tokens.weight"][batch["input_ids"]], []
        for i in range(max(TARGET_LAYER_IDS) + 1):
            x = layer(torch, qwen, CONFIG, tp, f"model.layers.{i}.", x, None, batch["ctx_pos"],
                      batch["ctx_pos"], None)
            caps.append(x)
        hidden = torch.cat([caps[i] for i in TARGET_LAYER_IDS], dim=-1)
    ctx = qwen.rms_norm(F.linear(hidden, dp["fc.weight"]), dp["hidden_norm.weight"], eps)
    h = tp["model.embed_tokens.weight"][batch["noise"]]
    for i in range(DRAFT_CFG["num_hidden_layers"]):
        h = layer(torch, qwen, DRAFT_CFG, dp, f"layers.{i}.", h, ctx, batch["draft_pos"],
                  batch["full_pos"], batch["allowed"])
    h = qwen.rms_norm(h, dp["norm.weight"], eps).view(B, N, BLOCK_SIZE, -1)[:, :, 1:]
    logits = F.linear(h, tp["lm_head.weight"])
    nll = F.cross_entropy(logits.reshape(-1, CONFIG["vocab_size"]),
                          batch["targets"][:, :, 1:].reshape(-1), reduction="none")
    w = batch["weights"].reshape(-1)
    return (nll * w).sum() / (w.sum() + 1e-6)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sprig", default=os.path.join(ROOT, "build", "tools", "sprig"))
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()

    torch = import_torch(args.threads)
    sys.path.insert(0, os.path.join(ROOT, "tests", "golden"))
    import make_dflash_golden as dflash
    import make_qwen_golden as qwen

    gen = torch.Generator().manual_seed(0)
    tp = {k: v.float() for k, v in qwen.make_params(CONFIG, gen).items()}
    dp = {k: v.float() for k, v in dflash.make_draft_params(DRAFT_CFG, gen).items()}
    loss_mask = torch.ones(B, S, dtype=torch.int64)
    loss_mask[:, :UNSUPERVISED] = 0
    # Anchors: distinct sorted positions t that are supervised and leave a whole block, t <= S - bs.
    lo, hi = UNSUPERVISED, S - BLOCK_SIZE
    anchors = torch.stack([(torch.randperm(hi - lo + 1, generator=gen)[:N] + lo).sort().values
                           for _ in range(B)])
    inputs = {"input_ids": torch.randint(0, MASK_ID, (B, S), generator=gen),
              "loss_mask": loss_mask, "anchors": anchors,
              "keep": torch.ones(B, N, dtype=torch.int64)}
    with tempfile.TemporaryDirectory(prefix="sprig_draft_step_") as tmp:
        target_dir, draft_dir = os.path.join(tmp, "target"), os.path.join(tmp, "draft")
        for path, cfg, params in [(target_dir, CONFIG, tp), (draft_dir, DRAFT_CFG, dp)]:
            os.makedirs(path)
            with open(os.path.join(path, "config.json"), "w") as f:
                json.dump(cfg, f, indent=2)
            qwen.save_safetensors(os.path.join(path, "model.safetensors"), params)
        input_path = os.path.join(tmp, "input.safetensors")
        qwen.save_safetensors(input_path, inputs)

        batch = make_batch(torch, dflash, inputs)
        dp = {k: v.requires_grad_() for k, v in dp.items()}
        theirs = time_torch_steps(dp.values(), lambda: draft_loss(torch, qwen, tp, dp, batch),
                                  args.reps)
        ours = sprig_step(args.sprig, ["draft-step", "--target", target_dir, "--draft", draft_dir,
                                       "--input", input_path, "--reps", str(args.reps),
                                       "--gamma", str(GAMMA)], args.threads)
    n_target, n_draft = (sum(v.numel() for v in p.values()) for p in (tp, dp))
    print(f"Qwen3 target {n_target / 1e6:.2f}M parameters (frozen), DFlash draft "
          f"{n_draft / 1e6:.2f}M parameters: {DRAFT_CFG['num_hidden_layers']} layer, block size "
          f"{BLOCK_SIZE}, target layers {TARGET_LAYER_IDS}, mask id {MASK_ID}")
    print(f"batch {B} x {S}, {N} anchors per row, dflash loss (gamma {GAMMA}), {args.threads} "
          f"threads, median of {args.reps} steps (capture + draft forward + backward)")
    report(torch, theirs, ours)


if __name__ == "__main__":
    main()
