#!/usr/bin/env python3
"""Writes the golden DFlash draft fixtures that sprig's C++ tests compare against.

An independent float64 PyTorch implementation of the DFlash draft objective (docs/semantics.md
§7-§9): hidden-state capture on the existing tests/golden/qwen3_tiny target (read only), the draft
forward, block inputs and positions, the DFlash mask, block targets, the decay-weighted DFlash and
variable-prefix losses, accuracy and acceptance length. Anchors and prefix lengths are given.
The "yarn" case gives target and draft YaRN positions (the "yarn" case of
rope_expected.safetensors): they rotate by the frequencies and cos/sin scale transformers computed
there, at the context's and the blocks' positions.

Writes:
    tests/golden/dflash_tiny/{config.json, model.safetensors}   random draft, F32, HF names
    tests/golden/dflash_tiny_expected.safetensors               per case "<case>.<name>": inputs
        (I64), loss / loss_weight / valid_tokens / correct_tokens / accept_len_sum / valid_blocks,
        logits [B*N*bs, V] and grad.<param> for every draft parameter (F64); metadata "cases".

Regenerate (Debian's python3-torch, CPU):
    /usr/bin/python3 tests/golden/make_dflash_golden.py
"""

import json
import math
import os
import struct
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from make_qwen_golden import forward, head_dim, rms_norm, rope, save_safetensors  # noqa: E402

BS, MASK, GAMMA, TARGET_LAYER_IDS = 4, 95, 7.0, [0, 1]
DRAFT_CFG = {
    "architectures": ["DFlashDraftModel"], "model_type": "qwen3", "vocab_size": 96,
    "hidden_size": 48, "intermediate_size": 80, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64, "rms_norm_eps": 1e-06,
    "rope_theta": 10000.0, "rope_parameters": {"rope_theta": 10000.0, "rope_type": "default"},
    "tie_word_embeddings": False, "attention_bias": False, "hidden_act": "silu",
    "max_position_embeddings": 128, "initializer_range": 0.02, "block_size": BS,
    "num_target_layers": 2, "layer_types": ["full_attention", "full_attention"],
    "use_sliding_window": False, "sliding_window": None, "max_window_layers": 2,
    "is_causal": False, "dtype": "float32",
    "dflash_config": {"block_size": BS, "mask_token_id": MASK,
                      "target_layer_ids": TARGET_LAYER_IDS, "causal": False},
}


def safetensors_metadata(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        return json.loads(f.read(n)).get("__metadata__", {})


def load_f32_safetensors(path, names=None):
    """u64 little-endian header length, JSON header, raw little-endian data (F32 only here);
    `names`: only those tensors."""
    with open(path, "rb") as f:
        data = f.read()
    n = struct.unpack("<Q", data[:8])[0]
    header, base, out = json.loads(data[8:8 + n]), 8 + n, {}
    for name, info in header.items():
        if name == "__metadata__" or (names is not None and name not in names):
            continue
        assert info["dtype"] == "F32", (name, info["dtype"])
        a, b = info["data_offsets"]
        buf = bytearray(data[base + a:base + b])
        out[name] = torch.frombuffer(buf, dtype=torch.float32).reshape(info["shape"]).clone()
    return out


def make_draft_params(cfg, gen):
    H, I, nH, nKV, D = (cfg["hidden_size"], cfg["intermediate_size"], cfg["num_attention_heads"],
                        cfg["num_key_value_heads"], head_dim(cfg))
    L = len(cfg["dflash_config"]["target_layer_ids"])

    def w(*shape, std=None):  # N(0, 1/sqrt(fan_in)) unless told
        std = std if std is not None else 1.0 / math.sqrt(shape[-1])
        return torch.randn(*shape, generator=gen, dtype=torch.float64) * std

    def norm(n):  # 1 + N(0, 0.1)
        return 1.0 + w(n, std=0.1)

    p = {"fc.weight": w(H, L * H), "hidden_norm.weight": norm(H)}
    for i in range(cfg["num_hidden_layers"]):  # names in the order of the draws
        layer_shapes = [("input_layernorm", (H,)), ("post_attention_layernorm", (H,)),
                        ("self_attn.q_proj", (nH * D, H)), ("self_attn.k_proj", (nKV * D, H)),
                        ("self_attn.v_proj", (nKV * D, H)), ("self_attn.o_proj", (H, nH * D)),
                        ("self_attn.q_norm", (D,)), ("self_attn.k_norm", (D,)),
                        ("mlp.gate_proj", (I, H)), ("mlp.up_proj", (I, H)),
                        ("mlp.down_proj", (H, I))]
        for name, shape in layer_shapes:
            p[f"layers.{i}.{name}.weight"] = norm(*shape) if len(shape) == 1 else w(*shape)
    p["norm.weight"] = norm(H)
    return p


def scaled_rope(inv_freq, scale):
    """A rotation by transformers' frequencies and cos/sin scale (rope_expected.safetensors)."""
    def rotate(x, pos):
        freqs = pos.to(torch.float32)[..., None] * inv_freq  # fp32, as HF
        emb = torch.cat([freqs, freqs], dim=-1)
        cos = (emb.cos() * scale).to(x.dtype)[:, :, None, :]
        sin = (emb.sin() * scale).to(x.dtype)[:, :, None, :]
        half = x.shape[-1] // 2
        return x * cos + torch.cat([-x[..., half:], x[..., :half]], dim=-1) * sin
    return rotate


def layer(cfg, p, pre, h, ctx, pos_q, pos_k, allowed, rot=None):
    """One Qwen3 decoder layer. Queries come from norm(h) [B, Q, H]; keys and values from
    [ctx | norm(h)] (ctx None: plain self-attention, the target). allowed [B, Q, KV] bool.
    rot(x, pos) rotates queries and keys (None: the default rope with rope_theta)."""
    B, Q, _ = h.shape
    nH, nKV, D = cfg["num_attention_heads"], cfg["num_key_value_heads"], head_dim(cfg)
    eps, theta = cfg["rms_norm_eps"], cfg["rope_theta"]
    x = rms_norm(h, p[pre + "input_layernorm.weight"], eps)
    src = x if ctx is None else torch.cat([ctx, x], dim=1)
    q = (x @ p[pre + "self_attn.q_proj.weight"].T).view(B, Q, nH, D)
    k = (src @ p[pre + "self_attn.k_proj.weight"].T).view(B, -1, nKV, D)
    v = (src @ p[pre + "self_attn.v_proj.weight"].T).view(B, -1, nKV, D)
    rot = rot or (lambda t, pos: rope(t, pos, theta))
    q = rot(rms_norm(q, p[pre + "self_attn.q_norm.weight"], eps), pos_q)
    k = rot(rms_norm(k, p[pre + "self_attn.k_norm.weight"], eps), pos_k)
    k, v = k.repeat_interleave(nH // nKV, dim=2), v.repeat_interleave(nH // nKV, dim=2)
    s = torch.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(D)
    s = s.masked_fill(~allowed[:, None], float("-inf"))
    a = torch.einsum("bhqk,bkhd->bqhd", s.softmax(-1), v).reshape(B, Q, nH * D)
    h = h + a @ p[pre + "self_attn.o_proj.weight"].T
    y = rms_norm(h, p[pre + "post_attention_layernorm.weight"], eps)
    gate, up = y @ p[pre + "mlp.gate_proj.weight"].T, y @ p[pre + "mlp.up_proj.weight"].T
    return h + (torch.nn.functional.silu(gate) * up) @ p[pre + "mlp.down_proj.weight"].T


def doc_ids(seq_lens, S):
    """doc[b, t] = #{j : cumsum(seq_lens[b])[j] <= t}; zero entries never split a document."""
    ends = seq_lens.cumsum(-1)
    return (ends[:, :, None] <= torch.arange(S)[None, None, :]).sum(1)


def target_hidden(cfg, p, ids, pos, doc, rot=None):
    """Residual stream after each decoder layer in TARGET_LAYER_IDS (HF hidden_states[i + 1]),
    concatenated on features -> [B, S, L*H]; document block-causal mask (doc all 0: causal)."""
    S = ids.shape[1]
    allowed = torch.ones(S, S, dtype=torch.bool).tril() & (doc[:, :, None] == doc[:, None, :])
    x, caps = p["model.embed_tokens.weight"][ids], []
    for i in range(cfg["num_hidden_layers"]):
        x = layer(cfg, p, f"model.layers.{i}.", x, None, pos, pos, allowed, rot)
        caps.append(x)
    return torch.cat([caps[i] for i in TARGET_LAYER_IDS], dim=-1), x


def dflash_mask(S, bs, anchors, keep, doc=None):
    """[B, Q, S + Q] bool, Q = N*bs: slot q of block j = q // bs sees the context keys strictly
    before its anchor (in its document when doc is given) iff the block is kept, and its own
    block's slots."""
    B, N = anchors.shape
    blk = torch.arange(N * bs) // bs
    a = anchors[:, blk]                                                # [B, Q]
    ctx = torch.arange(S)[None, None, :] < a[:, :, None]
    if doc is not None:
        ctx &= doc[:, None, :] == doc.gather(1, a)[:, :, None]
    ctx &= keep[:, blk].bool()[:, :, None]
    own = (blk[:, None] == blk[None, :]).expand(B, -1, -1)
    return torch.cat([ctx, own], dim=-1)


def block_inputs(ids, anchors, keep, bs, prefix=None):
    """Noise ids [B, N, bs]: slot k shows input_ids[a + k] iff k < l (l = 1 for DFlash), the block
    is kept and a + k < S; otherwise the mask token."""
    S = ids.shape[1]
    k = torch.arange(bs)
    idx = anchors[..., None] + k
    lens = torch.ones_like(anchors) if prefix is None else prefix
    show = (k < lens[..., None]) & keep.bool()[..., None] & (idx < S)
    real = ids.gather(1, idx.clamp(max=S - 1).flatten(1)).view(idx.shape)
    return torch.where(show, real, torch.full_like(real, MASK))


def block_targets(ids, loss_mask, anchors, keep, bs):
    """Slot k of block j targets input_ids[a + k]; block_mask = keep * (a + k < S) * loss_mask."""
    S = ids.shape[1]
    idx = anchors[..., None] + torch.arange(bs)
    safe = idx.clamp(max=S - 1).flatten(1)
    tgt = ids.gather(1, safe).view(idx.shape)
    lm = loss_mask.gather(1, safe).view(idx.shape)
    return tgt, keep[..., None].double() * (idx < S).double() * lm.double()


def draft_forward(cfg, p, tp, hidden, noise_ids, full_pos, allowed, rot=None):
    eps, S = cfg["rms_norm_eps"], hidden.shape[1]
    ctx = rms_norm(hidden @ p["fc.weight"].T, p["hidden_norm.weight"], eps)  # once, every layer
    h = tp["model.embed_tokens.weight"][noise_ids]
    for i in range(cfg["num_hidden_layers"]):
        h = layer(cfg, p, f"layers.{i}.", h, ctx, full_pos[:, S:], full_pos, allowed, rot)
    return rms_norm(h, p["norm.weight"], eps) @ tp["lm_head.weight"].T


def acceptance(pred, tgt, valid):
    """[B, N, K]: per block, the run of correct valid slots (invalid slots neither stop nor
    count), +1 bonus per block with any valid slot. Returns (accept_len_sum, valid_blocks)."""
    ok = (pred == tgt) | ~valid
    acc_len = (ok.long().cumprod(-1) * valid).sum(-1)
    vb = valid.any(-1)
    return ((acc_len + 1) * vb).sum(), vb.sum()


def loss_and_metrics(logits, tgt, bmask, gamma, prefix=None):
    """logits [B, N, bs, V]. DFlash: slots 1..bs-1, w = exp(-(k-1)/gamma) * m. Variable prefix:
    slots [min(2, bs-1), bs), sup = m * (k >= l), w = sup * exp(-(k-l)/gamma)."""
    bs = logits.shape[2]
    lo = 1 if prefix is None else min(2, bs - 1)
    k = torch.arange(lo, bs, dtype=torch.float64)
    m = bmask[..., lo:]
    if prefix is None:
        sup, w = m, m * torch.exp(-(k - 1) / gamma)
    else:
        l = prefix[..., None].double()
        sup = m * (k >= l).double()
        w = sup * torch.exp(-(k - l) / gamma)
    lg, t = logits[..., lo:, :], tgt[..., lo:]
    nll = -torch.log_softmax(lg, -1).gather(-1, t[..., None])[..., 0]
    valid, pred = sup > 0.5, lg.argmax(-1)
    top2 = lg.topk(2, -1).values
    assert ((top2[..., 0] - top2[..., 1])[valid] > 1e-3).all(), "argmax too close to a tie"
    acc_sum, blocks = acceptance(pred, t, valid)
    return {"loss": (nll * w).sum() / (w.sum() + 1e-6), "loss_weight": w.sum(),
            "valid_tokens": sup.sum(), "correct_tokens": ((pred == t) & valid).sum().double(),
            "accept_len_sum": acc_sum.double(), "valid_blocks": blocks.double()}


def self_test():
    """The worked examples E8 (masks), E10 (loss), E11 (acceptance), E12 (prefix inputs)."""
    T = torch.tensor

    def rows(S, bs, anchors, keep, seq_lens=None):
        doc = None if seq_lens is None else doc_ids(T([seq_lens]), S)
        m = dflash_mask(S, bs, T([anchors]), T([keep]), doc)[0].int().tolist()
        return ["".join(map(str, r[:S])) + "|" + "".join(map(str, r[S:])) for r in m]
    e8 = ["1100000000|111000"] * 3
    assert rows(10, 3, [2, 7], [1, 1], [5, 5]) == e8 + ["0000011000|000111"] * 3  # packed
    assert rows(10, 3, [2, 7], [1, 1]) == e8 + ["1111111000|000111"] * 3          # unpacked
    assert rows(6, 3, [1, 3], [1, 0]) == ["100000|111000"] * 3 + ["000000|000111"] * 3
    assert rows(5, 1, [4, 2], [1, 1], [3, 0, 2, 0]) == ["00010|10", "11000|01"]
    lg = T([[[[0., 0, 0], [2, 0, 0], [0, 1, 0]]]], dtype=torch.float64)
    r = loss_and_metrics(lg, T([[[0, 0, 2]]]), torch.ones(1, 1, 3).double(), 1.0)
    assert abs(r["loss"].item() - 0.5923686) < 1e-6 and abs(r["loss_weight"] - 1.3678794) < 1e-6
    assert [r[k].item() for k in list(r)[2:]] == [2, 1, 2, 1]  # valid, correct, accept, blocks
    tgt, valid = T([[[1, 2, 3, 4]] * 2]), T([[[1, 1, 0, 1], [1, 1, 1, 1]]]).bool()
    assert acceptance(T([[[1, 2, 9, 4], [9, 2, 3, 4]]]), tgt, torch.ones_like(valid)) == (4, 2)
    assert acceptance(T([[[1, 2, 0, 4], [1, 2, 3, 4]]]), tgt, valid) == (9, 2)
    noise = block_inputs(torch.arange(1, 21)[None], T([[2, 8]]), T([[1, 0]]), 4, T([[3, 2]]))
    assert noise.tolist() == [[[3, 4, 5, MASK], [MASK] * 4]]


def run_case(name, tcfg, tp, dp, inputs, loss_type, rot=None):
    ids, loss_mask, anchors, keep = (inputs[k] for k in ["input_ids", "loss_mask", "anchors",
                                                         "keep"])
    prefix = inputs.get("prefix_lengths") if loss_type == "variable_prefix" else None
    (B, S), N, V = ids.shape, anchors.shape[1], tcfg["vocab_size"]
    packed = "seq_lens" in inputs
    ctx_pos = inputs["position_ids"] if packed else torch.arange(S).expand(B, S)
    doc = doc_ids(inputs["seq_lens"], S) if packed else torch.zeros(B, S, dtype=torch.long)
    with torch.no_grad():
        hidden, last = target_hidden(tcfg, tp, ids, ctx_pos, doc, rot)
        if not packed and rot is None:  # the capture path reproduces make_qwen_golden's forward
            ref = forward(tcfg, tp, ids, ctx_pos)
            mine = rms_norm(last, tp["model.norm.weight"], tcfg["rms_norm_eps"])
            assert torch.allclose(mine @ tp["lm_head.weight"].T, ref, rtol=0, atol=1e-12)
    noise = block_inputs(ids, anchors, keep, BS, prefix).flatten(1)
    draft_pos = (ctx_pos.gather(1, anchors)[..., None] + torch.arange(BS)).flatten(1)
    full_pos = torch.cat([ctx_pos, draft_pos], dim=1)
    allowed = dflash_mask(S, BS, anchors, keep, doc if packed else None)
    Q = N * BS
    assert allowed[:, torch.arange(Q), S + torch.arange(Q)].all()  # every slot sees its block
    assert not allowed[:, :, :S][~keep.bool().repeat_interleave(BS, 1)].any()
    tgt, bmask = block_targets(ids, loss_mask, anchors, keep, BS)
    assert not bmask[~keep.bool()].any()  # a dropped block is never supervised

    params = {k: v.float().double().requires_grad_() for k, v in dp.items()}
    logits = draft_forward(DRAFT_CFG, params, tp, hidden, noise, full_pos, allowed, rot)
    out = loss_and_metrics(logits.view(B, N, BS, V), tgt, bmask, GAMMA, prefix)
    grads = torch.autograd.grad(out["loss"], list(params.values()))
    res = {f"{name}.{k}": v for k, v in inputs.items()}
    res.update({f"{name}.{k}": v.detach().double().reshape(1) for k, v in out.items()})
    res[f"{name}.logits"] = logits.detach().reshape(B * N * BS, V)
    res.update({f"{name}.grad.{k}": g for k, g in zip(params, grads)})
    o = {k: v.item() for k, v in out.items()}
    print(f"{name}: loss {o['loss']:.6f}, loss_weight {o['loss_weight']:.6f}, accept_len "
          f"{o['accept_len_sum'] / max(o['valid_blocks'], 1):.6f} ({o['accept_len_sum']:g}/"
          f"{o['valid_blocks']:g} blocks), correct {o['correct_tokens']:g}/{o['valid_tokens']:g}")
    return res


def main():
    torch.set_num_threads(1)
    self_test()
    tdir = os.path.join(HERE, "qwen3_tiny")
    with open(os.path.join(tdir, "config.json")) as f:
        tcfg = json.load(f)
    tp = load_f32_safetensors(os.path.join(tdir, "model.safetensors"))
    tp = {k: v.double() for k, v in tp.items()}  # frozen target, f32 values promoted

    # Seed picked so that every case has a correctly predicted supervised slot and two of them an
    # accepted run beyond the bonus token (random drafts rarely hit: V = 96).
    gen = torch.Generator().manual_seed(2073)
    dp = make_draft_params(DRAFT_CFG, gen)
    out_dir = os.path.join(HERE, "dflash_tiny")
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(DRAFT_CFG, f, indent=2)
    save_safetensors(os.path.join(out_dir, "model.safetensors"),
                     {k: v.float() for k, v in dp.items()})

    i64 = lambda x: torch.tensor(x, dtype=torch.int64)  # noqa: E731
    lm = torch.ones(2, 16, dtype=torch.int64)
    lm[0, :3], lm[1, :5] = 0, 0
    unpacked = {"input_ids": torch.randint(0, MASK, (2, 16), generator=gen), "loss_mask": lm,
                "anchors": i64([[2, 6, 9], [5, 8, 0]]), "keep": i64([[1, 1, 1], [1, 1, 0]])}
    plm = torch.ones(1, 16, dtype=torch.int64)
    plm[0, [0, 1, 9]] = 0
    packed = {"input_ids": torch.randint(0, MASK, (1, 16), generator=gen), "loss_mask": plm,
              "position_ids": i64([list(range(9)) + list(range(7))]),
              "doc_remaining": i64([list(range(8, -1, -1)) + list(range(6, -1, -1))]),
              "seq_lens": i64([[9, 7]]), "anchors": i64([[2, 4, 9, 11]]),
              "keep": i64([[1, 1, 1, 1]])}
    prefix = dict(unpacked, prefix_lengths=i64([[2, 3, 2], [3, 2, 3]]))

    dflash = "dflash: slots 1..bs-1, loss = sum(nll*w*m)/(sum(w*m)+1e-6), w = exp(-(k-1)/gamma)"
    # YaRN as transformers computed it for the tiny Qwen3 (make_rope_golden.py's "yarn" case).
    rope_file = os.path.join(HERE, "rope_expected.safetensors")
    rope_cases = json.loads(safetensors_metadata(rope_file)["cases"])
    rope_tensors = load_f32_safetensors(rope_file, {"yarn.inv_freq", "yarn.attention_scaling"})
    yarn = scaled_rope(rope_tensors["yarn.inv_freq"], rope_tensors["yarn.attention_scaling"][0])

    cases = {  # name: (inputs, loss_type, description)
        "unpacked": (unpacked, "dflash", dflash + "; target causal, positions 0..S-1; draft "
                     "positions anchor + k; row 1 block 2 dropped"),
        "packed": (packed, "dflash", dflash + "; target document-causal with position_ids; "
                   "draft positions position_ids[anchor] + k; context keys of the anchor's "
                   "document only; block targets without doc_remaining"),
        "prefix": (prefix, "variable_prefix", "variable_prefix on the unpacked inputs: slots "
                   "[2, bs), sup = m*(k >= l), w = sup*exp(-(k-l)/gamma), loss = sum(nll*w)/"
                   "(sum(w)+1e-6)"),
        "yarn": (unpacked, "dflash", "the unpacked case with YaRN rope_parameters on target and "
                 "draft (transformers' frequencies and cos/sin scale): context positions 0..S-1, "
                 "block positions anchor + k"),
    }
    expected, meta = {}, {}
    for name, (inputs, loss_type, text) in cases.items():
        expected.update(run_case(name, tcfg, tp, dp, inputs, loss_type,
                                 yarn if name == "yarn" else None))
        meta[name] = {"loss_type": loss_type, "gamma": GAMMA, "block_size": BS,
                      "mask_token_id": MASK, "target_layer_ids": TARGET_LAYER_IDS, "about": text}
        if name == "yarn":
            meta[name]["rope_parameters"] = rope_cases["yarn"]["rope_parameters"]
    meta = {"cases": json.dumps(meta), "target": "qwen3_tiny", "draft": "dflash_tiny",
            "grads": "grad.<param>: d loss / d param (the micro-batch mean), float64"}
    save_safetensors(os.path.join(HERE, "dflash_tiny_expected.safetensors"), expected, meta)


if __name__ == "__main__":
    main()
