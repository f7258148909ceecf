#!/usr/bin/env python3
"""Writes the golden Qwen fixtures that sprig's C++ tests compare against.

An independent PyTorch implementation of the Qwen2 / Qwen3 forward pass (HF transformers
numerics: fp32 RMSNorm statistics with the cast before the weight, rotate-half RoPE with fp32
inv_freq, GQA, Qwen3 q/k RMSNorm before RoPE, Qwen2 q/k/v biases) builds two tiny models with
random weights, saves each in Hugging Face layout (config.json + model.safetensors) and writes the
expected logits, loss and every parameter gradient, computed in float64, to expected.safetensors.

Regenerate (Debian's python3-torch, CPU):
    /usr/bin/python3 tests/golden/make_qwen_golden.py
"""

import json
import math
import os
import struct

import torch

HERE = os.path.dirname(os.path.abspath(__file__))

MODELS = {
    # Qwen3: q/k norm, GQA 4:2, explicit head_dim (heads * head_dim != hidden), untied head.
    # Head dims are 64, one the CUDA flash kernels serve, so the GPU tests can use these too.
    "qwen3_tiny": dict(model_type="qwen3", architectures=["Qwen3ForCausalLM"], vocab_size=96,
                       hidden_size=48, intermediate_size=80, num_hidden_layers=2,
                       num_attention_heads=4, num_key_value_heads=2, head_dim=64,
                       rms_norm_eps=1e-6, rope_theta=10000.0, tie_word_embeddings=False,
                       attention_bias=False, hidden_act="silu", max_position_embeddings=128,
                       initializer_range=0.02, torch_dtype="float32"),
    # Qwen2: q/k/v biases, tied embeddings, head_dim = hidden / heads.
    "qwen2_tiny": dict(model_type="qwen2", architectures=["Qwen2ForCausalLM"], vocab_size=80,
                       hidden_size=128, intermediate_size=64, num_hidden_layers=2,
                       num_attention_heads=2, num_key_value_heads=1, rms_norm_eps=1e-6,
                       rope_theta=1000000.0, tie_word_embeddings=True, hidden_act="silu",
                       max_position_embeddings=128, initializer_range=0.02,
                       use_sliding_window=False, torch_dtype="float32"),
}


def head_dim(cfg):
    return cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]


def make_params(cfg, gen):
    """HF-named parameters with random values large enough to exercise every term."""
    H, I, V = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    nH, nKV, D = cfg["num_attention_heads"], cfg["num_key_value_heads"], head_dim(cfg)
    qwen2 = cfg["model_type"] == "qwen2"

    def w(*shape, std=None):  # default: 1 / sqrt(fan-in), so activations stay O(1)
        std = std if std is not None else 1.0 / math.sqrt(shape[-1])
        return torch.randn(*shape, generator=gen, dtype=torch.float64) * std

    def norm(n):
        return 1.0 + w(n, std=0.1)

    p = {"model.embed_tokens.weight": w(V, H)}
    for i in range(cfg["num_hidden_layers"]):
        pre = f"model.layers.{i}."
        p[pre + "input_layernorm.weight"] = norm(H)
        p[pre + "self_attn.q_proj.weight"] = w(nH * D, H)
        p[pre + "self_attn.k_proj.weight"] = w(nKV * D, H)
        p[pre + "self_attn.v_proj.weight"] = w(nKV * D, H)
        p[pre + "self_attn.o_proj.weight"] = w(H, nH * D)
        if qwen2:
            p[pre + "self_attn.q_proj.bias"] = w(nH * D, std=0.1)
            p[pre + "self_attn.k_proj.bias"] = w(nKV * D, std=0.1)
            p[pre + "self_attn.v_proj.bias"] = w(nKV * D, std=0.1)
        else:
            p[pre + "self_attn.q_norm.weight"] = norm(D)
            p[pre + "self_attn.k_norm.weight"] = norm(D)
        p[pre + "post_attention_layernorm.weight"] = norm(H)
        p[pre + "mlp.gate_proj.weight"] = w(I, H)
        p[pre + "mlp.up_proj.weight"] = w(I, H)
        p[pre + "mlp.down_proj.weight"] = w(H, I)
    p["model.norm.weight"] = norm(H)
    if not cfg["tie_word_embeddings"]:
        p["lm_head.weight"] = w(V, H)
    return p


def rms_norm(x, w, eps):
    var = x.pow(2).mean(-1, keepdim=True)
    return w * (x * torch.rsqrt(var + eps))


def rope(x, pos, theta):
    """x [B, T, nH, D], pos [B, T]; rotate-half layout, fp32 inv_freq as HF computes it."""
    D = x.shape[-1]
    inv_freq = 1.0 / (theta ** (torch.arange(0, D, 2, dtype=torch.int64).float() / D))
    freqs = pos.to(torch.float32)[..., None] * inv_freq  # fp32, as HF
    emb = torch.cat([freqs, freqs], dim=-1)
    cos, sin = emb.cos().to(x.dtype)[:, :, None, :], emb.sin().to(x.dtype)[:, :, None, :]
    half = D // 2
    rot = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
    return x * cos + rot * sin


def forward(cfg, p, ids, pos):
    B, T = ids.shape
    nH, nKV, D = cfg["num_attention_heads"], cfg["num_key_value_heads"], head_dim(cfg)
    eps, theta = cfg["rms_norm_eps"], cfg["rope_theta"]
    x = p["model.embed_tokens.weight"][ids]
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    for i in range(cfg["num_hidden_layers"]):
        pre = f"model.layers.{i}."
        h = rms_norm(x, p[pre + "input_layernorm.weight"], eps)

        def proj(name, n):
            y = h @ p[pre + f"self_attn.{name}_proj.weight"].T
            if pre + f"self_attn.{name}_proj.bias" in p:
                y = y + p[pre + f"self_attn.{name}_proj.bias"]
            return y.view(B, T, n, D)

        q, k, v = proj("q", nH), proj("k", nKV), proj("v", nKV)
        if cfg["model_type"] == "qwen3":
            q = rms_norm(q, p[pre + "self_attn.q_norm.weight"], eps)
            k = rms_norm(k, p[pre + "self_attn.k_norm.weight"], eps)
        q, k = rope(q, pos, theta), rope(k, pos, theta)
        g = nH // nKV
        k = k.repeat_interleave(g, dim=2)
        v = v.repeat_interleave(g, dim=2)
        s = torch.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(D)
        s = s.masked_fill(~causal, float("-inf"))
        a = torch.einsum("bhqk,bkhd->bqhd", s.softmax(-1), v).reshape(B, T, nH * D)
        x = x + a @ p[pre + "self_attn.o_proj.weight"].T
        h = rms_norm(x, p[pre + "post_attention_layernorm.weight"], eps)
        gate = h @ p[pre + "mlp.gate_proj.weight"].T
        up = h @ p[pre + "mlp.up_proj.weight"].T
        x = x + (torch.nn.functional.silu(gate) * up) @ p[pre + "mlp.down_proj.weight"].T
    x = rms_norm(x, p["model.norm.weight"], eps)
    head = p["model.embed_tokens.weight"] if cfg["tie_word_embeddings"] else p["lm_head.weight"]
    return x @ head.T


ST_DTYPES = {torch.float32: "F32", torch.float64: "F64", torch.int64: "I64"}


def save_safetensors(path, tensors, metadata=None):
    """The safetensors format: u64 header length, JSON header (8-byte aligned), raw data."""
    header, blobs, offset = {"__metadata__": {"format": "pt", **(metadata or {})}}, [], 0
    for name, t in tensors.items():
        t = t.detach().contiguous()
        data = t.numpy().tobytes()
        header[name] = {"dtype": ST_DTYPES[t.dtype], "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":"))
    text += " " * ((8 - (8 + len(text)) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text.encode())
        for b in blobs:
            f.write(b)


def make(name, cfg, seed):
    gen = torch.Generator().manual_seed(seed)
    params = make_params(cfg, gen)
    out_dir = os.path.join(HERE, name)
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    save_safetensors(os.path.join(out_dir, "model.safetensors"),
                     {k: v.float() for k, v in params.items()})

    # The f32 checkpoint values, promoted to f64, are what the expected values are computed from.
    p = {k: v.float().double().requires_grad_() for k, v in params.items()}
    B, T = 2, 13
    ids = torch.randint(0, cfg["vocab_size"], (B, T), generator=gen)
    pos = torch.arange(T).expand(B, T)
    logits = forward(cfg, p, ids, pos)
    loss = torch.nn.functional.cross_entropy(
        logits[:, :-1].reshape(-1, cfg["vocab_size"]), ids[:, 1:].reshape(-1))
    loss.backward()
    expected = {"input_ids": ids, "logits": logits.detach(), "loss": loss.detach().reshape(1)}
    expected.update({"grad." + k: v.grad for k, v in p.items()})
    save_safetensors(os.path.join(HERE, name + "_expected.safetensors"), expected)
    print(f"{name}: loss {loss.item():.6f}, {len(p)} parameters -> {out_dir}")


if __name__ == "__main__":
    torch.set_num_threads(1)
    make("qwen3_tiny", MODELS["qwen3_tiny"], seed=1234)
    make("qwen2_tiny", MODELS["qwen2_tiny"], seed=4321)
