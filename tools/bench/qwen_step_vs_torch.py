#!/usr/bin/env python3
"""Forward + backward of the same tiny Qwen3 on the CPU: sprig against PyTorch.

Builds the CPU yardstick model (docs/architecture.md §9: H=256, 4 layers, 4/2 heads, D=64,
I=768, V=4096, untied: 5.25M parameters) with random weights through the PyTorch Qwen of
tests/golden/make_qwen_golden.py, writes it as a Hugging Face checkpoint plus the token ids to a
temporary directory, times PyTorch's forward + backward of the mean next-token cross-entropy,
then times `sprig bench step-qwen` on the same files, both on the same number of threads. Prints
both losses (they must agree), both median step times and the speed ratio (target: sprig >=
1.0x), and the ratio of process CPU time per step, which other jobs on a shared machine disturb
less.

Usage (Debian's python3-torch with libopenblas0-pthread; torch_blas.py refuses the reference BLAS):
    /usr/bin/python3 tools/bench/qwen_step_vs_torch.py --sprig build/tools/sprig
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

from torch_blas import require_openblas

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

CONFIG = dict(model_type="qwen3", architectures=["Qwen3ForCausalLM"], vocab_size=4096,
              hidden_size=256, intermediate_size=768, num_hidden_layers=4,
              num_attention_heads=4, num_key_value_heads=2, head_dim=64, rms_norm_eps=1e-6,
              rope_theta=1000000.0, tie_word_embeddings=False, attention_bias=False,
              hidden_act="silu", max_position_embeddings=4096, initializer_range=0.02,
              torch_dtype="float32")


def torch_step_times(torch, golden, params, ids, reps):
    """Median and minimum wall seconds of forward + backward, median CPU seconds, and the loss."""
    p = {k: v.float().requires_grad_() for k, v in params.items()}
    B, T = ids.shape
    pos = torch.arange(T).expand(B, T)
    times, cpu, loss = [], [], None
    for r in range(reps + 1):  # the first run warms up
        for t in p.values():
            t.grad = None
        start, cpu_start = time.perf_counter(), time.process_time()
        logits = golden.forward(CONFIG, p, ids, pos)
        loss = torch.nn.functional.cross_entropy(
            logits[:, :-1].reshape(-1, CONFIG["vocab_size"]), ids[:, 1:].reshape(-1))
        loss.backward()
        if r > 0:
            times.append(time.perf_counter() - start)
            cpu.append(time.process_time() - cpu_start)
    times.sort()
    cpu.sort()
    return times[len(times) // 2], times[0], cpu[len(cpu) // 2], loss.item()


def sprig_step(sprig, model_dir, ids_path, reps, threads):
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    out = subprocess.run([sprig, "bench", "step-qwen", "--model", model_dir, "--input", ids_path,
                          "--reps", str(reps)], env=env, check=True, capture_output=True,
                         text=True).stdout
    loss = float(re.search(r"^loss (\S+)", out, re.M).group(1))
    median, minimum = map(float, re.search(r"^step (\S+) s median, (\S+) s min", out, re.M).groups())
    cpu = float(re.search(r"^cpu (\S+) s", out, re.M).group(1))
    return median, minimum, cpu, loss, out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sprig", default=os.path.join(ROOT, "build", "tools", "sprig"))
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--seq", type=int, default=256)
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()

    # OpenBLAS sizes its thread pool when loaded, so the thread count is set before torch loads.
    os.environ["OPENBLAS_NUM_THREADS"] = os.environ["OMP_NUM_THREADS"] = str(args.threads)
    import torch
    require_openblas(torch)
    sys.path.insert(0, os.path.join(ROOT, "tests", "golden"))
    import make_qwen_golden as golden

    torch.set_num_threads(args.threads)
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

        t_med, t_min, t_cpu, t_loss = torch_step_times(torch, golden, params, ids, args.reps)
        s_med, s_min, s_cpu, s_loss, s_out = sprig_step(args.sprig, model_dir, ids_path, args.reps,
                                                 args.threads)
    n = sum(v.numel() for v in params.values())
    print(f"Qwen3 {n / 1e6:.2f}M parameters, batch {args.batch} x {args.seq}, "
          f"{args.threads} threads, median of {args.reps} steps (forward + backward)")
    print(f"PyTorch {torch.__version__}: loss {t_loss:.6f}, step {t_med:.3f} s (min {t_min:.3f}), "
          f"cpu {t_cpu:.3f} s")
    print(f"sprig: loss {s_loss:.6f}, step {s_med:.3f} s (min {s_min:.3f}), cpu {s_cpu:.3f} s")
    print(s_out.strip())
    if abs(s_loss - t_loss) > 1e-4 * abs(t_loss):
        sys.exit(f"the losses differ: sprig {s_loss} vs PyTorch {t_loss}")
    print(f"PyTorch CPU time / sprig CPU time per step: {t_cpu / s_cpu:.2f}x")
    print(f"sprig speed / PyTorch speed: {t_med / s_med:.2f}x (target >= 1.0x)")


if __name__ == "__main__":
    main()
