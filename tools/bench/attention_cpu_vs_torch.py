#!/usr/bin/env python3
"""Masked attention on the CPU: sprig's tiled flash attention against PyTorch (issue 4 target:
sprig >= 1.0x).

Runs `sprig bench attention --device cpu --json` (causal, packed documents, prefix tree, DFlash at
the CPU sizes: T=1024, 4 heads, D=64, f32), rebuilds each mask in PyTorch from the spec printed in
its row (attention_masks.py, the rules of docs/semantics.md §2; its allowed-element count must
equal sprig's), and times the straightforward PyTorch implementation on the same shapes:
q @ k^T * scale, masked_fill with the dense mask, softmax, @ v, GQA by repeat_interleave, backward
by autograd. Both run on the same number of threads (PyTorch on OpenBLAS; torch_blas.py refuses
the reference BLAS). Prints both median times and the speed ratios (PyTorch time / sprig time) last.

Usage (Debian's python3-torch 1.13):
    /usr/bin/python3 tools/bench/attention_cpu_vs_torch.py --sprig build/tools/sprig
"""

import argparse
import os
import sys

from attention_masks import dense_mask, run_sprig, time_median
from torch_blas import require_openblas

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def torch_attention(torch, q, k, v, mask, scale):
    """q [B, Tq, H, D], k and v [B, Tk, Hkv, D], mask bool [Tq, Tk] -> out [B, Tq, H, D]."""
    groups = q.shape[2] // k.shape[2]
    qh = q.transpose(1, 2)
    kh = k.transpose(1, 2).repeat_interleave(groups, dim=1)
    vh = v.transpose(1, 2).repeat_interleave(groups, dim=1)
    scores = (qh @ kh.transpose(-1, -2) * scale).masked_fill(~mask, float("-inf"))
    return (torch.softmax(scores, dim=-1) @ vh).transpose(1, 2)


def torch_times(torch, row, reps):
    """Median forward and backward seconds of torch_attention on the row's shapes and mask."""
    mask = dense_mask(torch, row["spec"])
    allowed = int(mask.sum())
    if allowed != row["allowed"]:
        sys.exit(f"{row['mask']}: the PyTorch mask allows {allowed} elements, "
                 f"sprig {row['allowed']}")
    b, tq, tk, d = row["batch"], row["q_len"], row["k_len"], row["head_dim"]
    gen = torch.Generator().manual_seed(0)
    q = torch.randn(b, tq, row["heads"], d, generator=gen).requires_grad_()
    k = torch.randn(b, tk, row["kv_heads"], d, generator=gen).requires_grad_()
    v = torch.randn(b, tk, row["kv_heads"], d, generator=gen).requires_grad_()
    dout = torch.randn(b, tq, row["heads"], d, generator=gen)
    scale = d ** -0.5
    fwd = time_median(lambda: torch_attention(torch, q, k, v, mask, scale), 1, reps)
    out = torch_attention(torch, q, k, v, mask, scale)
    bwd = time_median(lambda: torch.autograd.grad(out, (q, k, v), dout, retain_graph=True), 1,
                      reps)
    return fwd, bwd


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sprig", default=os.path.join(ROOT, "build", "tools", "sprig"),
                        help="the sprig binary (default: build/tools/sprig)")
    parser.add_argument("--threads", type=int, default=2, help="threads of both (default 2)")
    parser.add_argument("--reps", type=int, default=5, help="timed runs after one warm-up")
    args = parser.parse_args()

    import torch
    require_openblas(torch)
    torch.set_num_threads(args.threads)
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads))
    rows = run_sprig(args.sprig, ["--device", "cpu", "--mask", "all", "--reps", str(args.reps)],
                     env)
    print(f"masked attention on the CPU, {args.threads} threads, f32, median of {args.reps} runs; "
          f"ratio = PyTorch time / sprig time (target >= 1.0)")
    print(f"{'mask':<12} {'B x Tq x Tk, H/Hkv, D':<28} {'allowed':>9} {'sprig fwd':>10} "
          f"{'torch fwd':>10} {'sprig bwd':>10} {'torch bwd':>10} {'ratio fwd':>10} "
          f"{'bwd':>6} {'fwd+bwd':>8}")
    for row in rows:
        fwd, bwd = torch_times(torch, row, args.reps)
        s_fwd, s_bwd = row["fwd_ms"] / 1e3, row["bwd_ms"] / 1e3
        shape = (f"{row['batch']} x {row['q_len']} x {row['k_len']}, "
                 f"{row['heads']}/{row['kv_heads']}, {row['head_dim']}")
        print(f"{row['mask']:<12} {shape:<28} {row['allowed']:>9} {s_fwd * 1e3:>8.1f}ms "
              f"{fwd * 1e3:>8.1f}ms {s_bwd * 1e3:>8.1f}ms {bwd * 1e3:>8.1f}ms "
              f"{fwd / s_fwd:>9.2f}x {bwd / s_bwd:>5.2f}x {(fwd + bwd) / (s_fwd + s_bwd):>7.2f}x")


if __name__ == "__main__":
    main()
