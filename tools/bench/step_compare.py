"""What the scripts timing a training step against PyTorch share: PyTorch loaded on a given
number of threads (and on OpenBLAS), its step timed, sprig's `bench` helper run and read, and the
side-by-side report with the loss cross-check."""

import os
import re
import subprocess
import sys
import time

from torch_blas import require_openblas


def import_torch(threads):
    """PyTorch on `threads` threads. OpenBLAS sizes its pool when it loads, so the environment is
    set before the import."""
    os.environ["OPENBLAS_NUM_THREADS"] = os.environ["OMP_NUM_THREADS"] = str(threads)
    import torch
    require_openblas(torch)
    torch.set_num_threads(threads)
    return torch


def time_torch_steps(params, loss_fn, reps, optimizer=None):
    """Median and minimum wall seconds, median CPU seconds and the loss of `reps` steps (after
    one warm-up): gradients of `params` cleared, then loss_fn(), its backward and, when given,
    optimizer.step() timed."""
    params = list(params)
    times, cpu, loss = [], [], None
    for r in range(reps + 1):
        for p in params:
            p.grad = None
        start, cpu_start = time.perf_counter(), time.process_time()
        loss = loss_fn()
        loss.backward()
        if optimizer is not None:
            optimizer.step()
        if r > 0:
            times.append(time.perf_counter() - start)
            cpu.append(time.process_time() - cpu_start)
    times.sort()
    cpu.sort()
    return times[len(times) // 2], times[0], cpu[len(cpu) // 2], loss.item()


def sprig_step(sprig, bench_args, threads):
    """`sprig bench <bench_args>` on `threads` threads: (median, minimum, cpu, loss, its output)."""
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    out = subprocess.run([sprig, "bench"] + bench_args, env=env, check=True, capture_output=True,
                         text=True).stdout
    loss = float(re.search(r"^loss (\S+)", out, re.M).group(1))
    median, minimum = map(float, re.search(r"^step (\S+) s median, (\S+) s min", out,
                                           re.M).groups())
    cpu = float(re.search(r"^cpu (\S+) s", out, re.M).group(1))
    return median, minimum, cpu, loss, out


def report(torch, theirs, ours, update_norm=None, target=1.0):
    """Prints both sides (theirs = time_torch_steps's result, ours = sprig_step's), exits unless
    the losses agree to 1e-4 (and, given PyTorch's `update_norm`, the norms of the weights' total
    change agree to 1e-3), then prints the CPU-time and speed ratios."""
    t_med, t_min, t_cpu, t_loss = theirs
    s_med, s_min, s_cpu, s_loss, s_out = ours
    print(f"PyTorch {torch.__version__}: loss {t_loss:.6f}, step {t_med:.3f} s (min {t_min:.3f}), "
          f"cpu {t_cpu:.3f} s")
    print(f"sprig: loss {s_loss:.6f}, step {s_med:.3f} s (min {s_min:.3f}), cpu {s_cpu:.3f} s")
    print(s_out.strip())
    if abs(s_loss - t_loss) > 1e-4 * abs(t_loss):
        sys.exit(f"the losses differ: sprig {s_loss} vs PyTorch {t_loss}")
    if update_norm is not None:
        s_norm = float(re.search(r"^update_norm (\S+)", s_out, re.M).group(1))
        print(f"weights' total change: PyTorch {update_norm:.6f}, sprig {s_norm:.6f}")
        if abs(s_norm - update_norm) > 1e-3 * update_norm:
            sys.exit(f"the updated weights differ: sprig {s_norm} vs PyTorch {update_norm}")
    print(f"PyTorch CPU time / sprig CPU time per step: {t_cpu / s_cpu:.2f}x")
    print(f"sprig speed / PyTorch speed: {t_med / s_med:.2f}x (target >= {target:.1f}x)")
