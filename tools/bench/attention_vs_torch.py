#!/usr/bin/env python3
"""Masked attention on the GPU: sprig against PyTorch's SDPA (flash, cuDNN) and FlexAttention.

The benchmark of issue 4's targets, one run on the GPU machine (PyTorch >= 2.5 with CUDA). Runs
`sprig bench attention --device cuda --json` (dense causal T=4k and 16k with B*T = 16k, packed
documents of 16k tokens, prefix tree N=8 P=2048 C=512, DFlash S=3072 with 512 anchors and bs=16;
16 heads, D=128, bf16; each case on sprig's kernels and, where cuDNN expresses the mask, on sprig's
cuDNN backend, shown as "sp-cud"), and on the same shapes times, fwd and bwd in bf16:
  - SDPA with the flash and the cuDNN backends where the mask is expressible (dense causal);
  - FlexAttention always, its mask_mod built from the row's spec with the rules of
    docs/semantics.md §2 (attention_masks.py; its block mask's allowed count must equal sprig's).
TFLOP/s count allowed elements only: fwd 4 * D * allowed * H * B, bwd 2.5x that. Printed last, the
ratios of the targets: sprig / flash on causal (>= 0.8), sprig / Flex on every mask (>= 1.0),
sprig's cuDNN backend / PyTorch's cuDNN SDPA on the same shapes (>= 0.95), each
custom mask against sprig's best dense causal rate (>= 0.85), and the prefix tree's fwd+bwd time
against the same completions with the prompt repeated N times (sprig both; >= 1.8x).

Usage (tools/gpu_check.sh runs it after building):
    python3 tools/bench/attention_vs_torch.py --sprig build-gpu/tools/sprig
"""

import argparse
import os
import sys
import traceback

from attention_masks import allowed_fn, count_allowed, run_sprig

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def cuda_median(torch, fn, warmup, reps):
    """Median seconds per call of fn(), calls queued back to back between CUDA events."""
    for _ in range(warmup):
        fn()
    marks = [torch.cuda.Event(enable_timing=True) for _ in range(reps + 1)]
    marks[0].record()
    for mark in marks[1:]:
        fn()
        mark.record()
    marks[-1].synchronize()
    times = sorted(a.elapsed_time(b) / 1e3 for a, b in zip(marks, marks[1:]))
    return times[len(times) // 2]


def fwd_bwd_times(torch, attend, row, reps):
    """Median fwd and bwd seconds of attend(q, k, v) on the row's shapes ([B, H, T, D], bf16)."""
    b, h, hkv, d = row["batch"], row["heads"], row["kv_heads"], row["head_dim"]
    new = lambda heads, t: torch.randn(b, heads, t, d, device="cuda", dtype=torch.bfloat16,
                                       requires_grad=True)
    q, k, v = new(h, row["q_len"]), new(hkv, row["k_len"]), new(hkv, row["k_len"])
    dout = torch.randn_like(q)
    fwd = cuda_median(torch, lambda: attend(q, k, v), 3, reps)
    out = attend(q, k, v)
    bwd = cuda_median(torch, lambda: torch.autograd.grad(out, (q, k, v), dout, retain_graph=True),
                      3, reps)
    return fwd, bwd


def sdpa(torch, backend, gqa):
    from torch.nn.attention import SDPBackend, sdpa_kernel
    chosen = getattr(SDPBackend, backend)

    def attend(q, k, v):
        with sdpa_kernel(chosen):
            return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True,
                                                                    enable_gqa=gqa)
    return attend


def flex(torch, row, gqa):
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention
    allowed = allowed_fn(torch, row["spec"], "cuda")
    block_mask = create_block_mask(lambda b, h, q, k: allowed(q, k), None, None, row["q_len"],
                                   row["k_len"], device="cuda")
    compiled = torch.compile(flex_attention)
    return lambda q, k, v: compiled(q, k, v, block_mask=block_mask, enable_gqa=gqa)


def measure(torch, row, reps):
    """{name: (fwd s, bwd s)} of PyTorch's implementations on the row (None where one failed)."""
    gqa = row["heads"] != row["kv_heads"]
    impls = {}
    if row["spec"]["kind"] == "causal":
        impls["flash"] = lambda: sdpa(torch, "FLASH_ATTENTION", gqa)
        impls["cudnn"] = lambda: sdpa(torch, "CUDNN_ATTENTION", gqa)
    impls["flex"] = lambda: flex(torch, row, gqa)
    times = {}
    for name, make in impls.items():
        try:
            times[name] = fwd_bwd_times(torch, make(), row, reps)
        except Exception:  # one backend failing must not hide the others' numbers
            print(f"{row['mask']} {name}: failed\n{traceback.format_exc()}", file=sys.stderr)
            times[name] = None
        torch.cuda.empty_cache()
    return times


def rates(row, fwd, bwd):
    """(fwd, bwd, fwd+bwd) TFLOP/s over allowed elements."""
    flops = 4.0 * row["head_dim"] * row["allowed"] * row["heads"] * row["batch"]
    return flops / fwd / 1e12, 2.5 * flops / bwd / 1e12, 3.5 * flops / (fwd + bwd) / 1e12


def label(row):
    return f"{row['mask']} {row['batch']}x{row['q_len']}x{row['k_len']}"


def repeated_prompt_row(sprig, tree, reps):
    """sprig's row for the prefix tree's completions each behind its own copy of the prompt:
    one causal row per sample path (all paths must have one length)."""
    lens = tree["spec"]["node_lengths"]
    paths = {sum(lens[u] for u in path) for path in tree["spec"]["sample_paths"]}
    if len(paths) != 1:
        return None
    rows = tree["batch"] * len(tree["spec"]["sample_paths"])
    return run_sprig(sprig, ["--device", "cuda", "--backend", "sprig", "--mask", "causal",
                             "--seq", str(paths.pop()),
                             "--batch", str(rows), "--heads", str(tree["heads"]),
                             "--kv-heads", str(tree["kv_heads"]),
                             "--head-dim", str(tree["head_dim"]), "--reps", str(reps)])[0]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sprig", default=os.path.join(ROOT, "build-gpu", "tools", "sprig"),
                        help="the sprig binary (default: build-gpu/tools/sprig)")
    parser.add_argument("--mask", default="all",
                        choices=["causal", "documents", "prefix_tree", "dflash", "all"])
    parser.add_argument("--reps", type=int, default=20, help="timed runs after 3 warm-up runs")
    args = parser.parse_args()

    import torch
    print(f"PyTorch {torch.__version__} on {torch.cuda.get_device_name()}; bf16, median of "
          f"{args.reps} runs; TFLOP/s over allowed elements (bwd = 2.5x fwd FLOPs)", flush=True)
    rows = run_sprig(args.sprig, ["--device", "cuda", "--mask", args.mask, "--reps",
                                  str(args.reps)])
    # sprig's cuDNN backend rows, by case; the other rows are sprig's kernels.
    on_cudnn = {label(r): r for r in rows if r.get("backend") == "cudnn"}
    rows = [r for r in rows if r.get("backend") != "cudnn"]
    print(f"{'case':<30} {'impl':<6} {'fwd ms':>8} {'bwd ms':>8} {'fwd':>7} {'bwd':>7} "
          f"{'fwd+bwd':>8}  (TFLOP/s)", flush=True)
    results = []  # (row, {impl: (fwd, bwd) or None}) with sprig's own times under "sprig"
    for row in rows:
        allowed = count_allowed(torch, row["spec"], "cuda")
        if allowed != row["allowed"]:
            sys.exit(f"{label(row)}: the PyTorch mask allows {allowed} elements, sprig "
                     f"{row['allowed']}")
        times = {"sprig": (row["fwd_ms"] / 1e3, row["bwd_ms"] / 1e3)}
        if label(row) in on_cudnn:
            ours = on_cudnn[label(row)]
            times["sp-cud"] = (ours["fwd_ms"] / 1e3, ours["bwd_ms"] / 1e3)
        times.update(measure(torch, row, args.reps))
        for name, t in times.items():
            shown = (f"{t[0] * 1e3:>8.3f} {t[1] * 1e3:>8.3f} " +
                     "{:>7.1f} {:>7.1f} {:>8.1f}".format(*rates(row, *t))) if t else "failed"
            print(f"{label(row):<30} {name:<6} {shown}", flush=True)
        results.append((row, times))

    print("\nratios (sprig / PyTorch, TFLOP/s; fwd, bwd, fwd+bwd)")
    dense = [rates(r, *t["sprig"]) for r, t in results if r["spec"]["kind"] == "causal"]
    best_dense = [max(col) for col in zip(*dense)] if dense else None
    for row, times in results:
        ours = rates(row, *times["sprig"])
        for name, goal in (("flash", 0.8), ("cudnn", None), ("flex", 1.0)):
            if times.get(name):
                theirs = rates(row, *times[name])
                ratio = ", ".join(f"{a / b:.2f}" for a, b in zip(ours, theirs))
                target = f"  (target >= {goal})" if goal else ""
                print(f"{label(row):<30} vs {name:<14} {ratio}{target}")
        if times.get("sp-cud") and times.get("cudnn"):
            ratio = ", ".join(f"{a / b:.2f}" for a, b in
                              zip(rates(row, *times["sp-cud"]), rates(row, *times["cudnn"])))
            print(f"{label(row):<30} sprig's cudnn vs cudnn {ratio}  (target >= 0.95)")
        if best_dense and row["spec"]["kind"] != "causal":
            ratio = ", ".join(f"{a / b:.2f}" for a, b in zip(ours, best_dense))
            print(f"{label(row):<30} vs sprig dense   {ratio}  (target >= 0.85)")
        if row["spec"]["kind"] == "prefix_tree":
            naive = repeated_prompt_row(args.sprig, row, args.reps)
            if naive:
                speedup = (naive["fwd_ms"] + naive["bwd_ms"]) / (row["fwd_ms"] + row["bwd_ms"])
                print(f"{label(row):<30} fwd+bwd {speedup:.2f}x faster than {label(naive)} "
                      f"(prompt repeated; target >= 1.8)")


if __name__ == "__main__":
    main()
