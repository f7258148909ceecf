#!/usr/bin/env python3
"""The losses of one recipe's two runs in tools/gpu_check.sh: CUDA in bf16 against the CPU in f32.

Usage: compare_losses.py CUDA_METRICS.jsonl CPU_METRICS.jsonl

Passes (exit 0) when both runs logged every step, their first-step losses agree within bf16's
tolerance (the same weights and batch; bf16 keeps 8 bits of mantissa, so a loss may move by about
1%, and a small distillation loss by a few thousandths: |cuda - cpu| <= 0.02 |cpu| + 0.005), and the
CUDA run's loss falls (the mean of its last five steps below that of its first five). Prints one line with the figures.
"""

import json
import sys


def losses(path):
    with open(path) as f:
        return [json.loads(line)["loss"] for line in f if line.strip()]


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    cuda, cpu = losses(sys.argv[1]), losses(sys.argv[2])
    problems = []
    if len(cuda) < 10 or len(cuda) != len(cpu):
        problems.append(f"steps logged: cuda {len(cuda)}, cpu {len(cpu)}")
    else:
        gap = abs(cuda[0] - cpu[0])
        if gap > 0.02 * abs(cpu[0]) + 0.005:
            problems.append(f"first-step losses differ by {gap:.4g}")
        if sum(cuda[-5:]) >= sum(cuda[:5]):
            problems.append("the CUDA loss does not fall")
    figures = (f"step 1: cuda {cuda[0]:.4f} cpu {cpu[0]:.4f}; step {len(cuda)}: cuda "
               f"{cuda[-1]:.4f} cpu {cpu[-1]:.4f}" if cuda and cpu else "no losses")
    print(figures + ("; " + "; ".join(problems) if problems else ""))
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
