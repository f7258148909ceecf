#!/usr/bin/env python3
"""Writes the golden GRU fixture that sprig's C++ tests compare against.

PyTorch's own torch.nn.GRU(E, G, bias=False, batch_first=True) (one layer, h0 = 0) in float64 on
the CPU, with its default initialisation under a fixed seed and a seeded input: the output for
x [R, T, E] and the gradients of sum(out * c), c a fixed random [R, T, G], with respect to x and
both weights.

Writes tests/golden/gru_expected.safetensors (F64): x, weight_ih_l0, weight_hh_l0, c, out,
grad.x, grad.weight_ih_l0, grad.weight_hh_l0.

Regenerate (Debian's python3-torch, CPU):
    /usr/bin/python3 tests/golden/make_gru_golden.py
"""

import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from make_qwen_golden import save_safetensors  # noqa: E402

R, T, E, G = 3, 5, 8, 6


def main():
    torch.set_num_threads(1)
    torch.manual_seed(2024)  # nn.GRU draws its weights from the global generator
    gru = torch.nn.GRU(E, G, bias=False, batch_first=True).double()
    gen = torch.Generator().manual_seed(4202)
    x = torch.randn(R, T, E, generator=gen, dtype=torch.float64).requires_grad_()
    c = torch.randn(R, T, G, generator=gen, dtype=torch.float64)
    out, h_last = gru(x)
    assert torch.equal(out[:, -1], h_last[0])
    (out * c).sum().backward()
    tensors = {
        "x": x.detach(),
        "weight_ih_l0": gru.weight_ih_l0.detach(),
        "weight_hh_l0": gru.weight_hh_l0.detach(),
        "c": c,
        "out": out.detach(),
        "grad.x": x.grad,
        "grad.weight_ih_l0": gru.weight_ih_l0.grad,
        "grad.weight_hh_l0": gru.weight_hh_l0.grad,
    }
    path = os.path.join(HERE, "gru_expected.safetensors")
    save_safetensors(path, tensors, {"R": str(R), "T": str(T), "E": str(E), "G": str(G)})
    print(f"gru: R={R} T={T} E={E} G={G}, sum(out * c) = {(out * c).sum().item():.12f} -> {path}")


if __name__ == "__main__":
    main()
