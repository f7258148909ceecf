#!/usr/bin/env python3
"""A training step of the same tiny Qwen3 on the CPU: sprig against PyTorch.

Builds the CPU yardstick model (docs/architecture.md §9: H=256, 4 layers, 4/2 heads, D=64,
I=768, V=4096, untied: 5.25M parameters) with random weights through the PyTorch Qwen of
tests/golden/make_qwen_golden.py, writes it as a Hugging Face checkpoint plus the token ids to a
temporary directory, times PyTorch's training step (forward and backward of the mean next-token
cross-entropy, then torch.optim.AdamW's update, lr 1e-3, weight decay 0.01), then times
`sprig bench step-qwen` on the same files, both on the same number of threads and for the same
number of steps. Prints both last losses and both norms of the weights' total change (each pair
must agree), both median step times and the speed ratio (target: sprig >= 2.0x), and the ratio
of process CPU time per step, which other jobs on a shared machine disturb less.

Usage (Debian's python3-torch with libopenblas0-pthread; step_compare.py refuses the reference BLAS):
    /usr/bin/python3 tools/bench/qwen_step_vs_torch.py --sprig build/tools/sprig
"""

import argparse
import json
import os
import sys
import tempfile

from step_compare import import_torch, report, sprig_step, time_torch_steps

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

CONFIG = dict(model_type="qwen3", architectures=["Qwen3ForCausalLM"], vocab_size=4096,
              hidden_size=256, intermediate_size=768, num_hidden_layers=4,
              num_attention_heads=4, num_key_value_heads=2, head_dim=64, rms_norm_eps=1e-6,
              rope_theta=1000000.0, tie_word_embeddings=False, attention_bias=False,
              hidden_act="silu", max_position_embeddings=4096, initializer_range=0.02,
              torch_dtype="float32")
LR, WEIGHT_DECAY = 1e-3, 0.01


def torch_loss_fn(torch, golden, params, ids):
    """The mean next-token cross-entropy of the PyTorch Qwen on `ids`."""
    B, T = ids.shape
    pos = torch.arange(T).expand(B, T)

    def loss():
        logits = golden.forward(CONFIG, params, ids, pos)
        return torch.nn.functional.cross_entropy(
            logits[:, :-1].reshape(-1, CONFIG["vocab_size"]), ids[:, 1:].reshape(-1))
    return loss


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sprig", default=os.path.join(ROOT, "build", "tools", "sprig"))
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--seq", type=int, default=256)
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()

    torch = import_torch(args.threads)
    sys.path.insert(0, os.path.join(ROOT, "tests", "golden"))
    import make_qwen_golden as golden

    gen = torch.Generator().manual_seed(0)
    params = {k: v.float() for k, v in golden.make_params(CONFIG, gen).items()}
    ids = torch.randint(0, CONFIG["vocab_size"], (args.batch, args.seq), generator=gen)
    with tempfile.TemporaryDirectory(prefix="sprig_qwen_step_") as tmp:
        model_dir = os.path.join(tmp, "model")
        os.makedirs(model_dir)
        with open(os.path.join(model_dir, "config.json"), "w") as f:
            json.dump(CONFIG, f, indent=2)
        golden.save_safetensors(os.path.join(model_dir, "model.safetensors"), params)
        ids_path = os.path.join(tmp, "ids.safetensors")
        golden.save_safetensors(ids_path, {"input_ids": ids})

        initial = {k: v.clone() for k, v in params.items()}
        p = {k: v.requires_grad_() for k, v in params.items()}
        optimizer = torch.optim.AdamW(p.values(), lr=LR, weight_decay=WEIGHT_DECAY, eps=1e-8)
        theirs = time_torch_steps(p.values(), torch_loss_fn(torch, golden, p, ids), args.reps,
                                  optimizer)
        with torch.no_grad():
            moved = sum(((p[k].double() - initial[k].double()) ** 2).sum() for k in p)
        ours = sprig_step(args.sprig, ["step-qwen", "--model", model_dir, "--input", ids_path,
                                       "--reps", str(args.reps), "--lr", str(LR),
                                       "--weight-decay", str(WEIGHT_DECAY)], args.threads)
    n = sum(v.numel() for v in params.values())
    print(f"Qwen3 {n / 1e6:.2f}M parameters, batch {args.batch} x {args.seq}, "
          f"{args.threads} threads, median of {args.reps} steps (forward, backward, AdamW)")
    report(torch, theirs, ours, float(moved.sqrt()), target=2.0)


if __name__ == "__main__":
    main()
