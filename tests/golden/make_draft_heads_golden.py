#!/usr/bin/env python3
"""Writes the golden Domino and JetSpec draft fixtures that sprig's C++ tests compare against.

An independent float64 PyTorch implementation of the Domino objective (docs/semantics.md §9.4:
shifted block targets cut at the document end, GRU prefix state, correction head, decayed final
and base losses mixed by lambda) and of the JetSpec objective (§9.5: in-block causal mask,
forward KL to the target's own predictions), on the tiny target tests/golden/qwen3_tiny (read
only). The prologue (capture, block inputs, positions, DFlash mask, draft layers) and the
acceptance rule come from make_dflash_golden.py. Anchors are given.

Writes:
    tests/golden/domino_tiny/{config.json, model.safetensors}   random Domino draft, F32, HF names
    tests/golden/draft_heads_expected.safetensors              per case "<case>.<name>": inputs
        (I64), loss / loss_weight / valid_tokens / correct_tokens / accept_len_sum / valid_blocks
        (Domino also final_loss / base_loss / base_correct_tokens / base_accept_len_sum), logits
        [B*N*bs, V] and grad.<param> for every draft parameter (F64); metadata "cases".
JetSpec uses the DFlash draft tests/golden/dflash_tiny (read only).

Regenerate (Debian's python3-torch, CPU):
    /usr/bin/python3 tests/golden/make_draft_heads_golden.py
"""

import copy
import json
import math
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from make_dflash_golden import (BS, DRAFT_CFG, GAMMA, MASK, acceptance, block_inputs,  # noqa: E402
                                dflash_mask, doc_ids, layer, load_f32_safetensors,
                                make_draft_params, target_hidden)
from make_qwen_golden import forward, rms_norm, save_safetensors  # noqa: E402

E, G = 16, 12  # emb_dim, gru_hidden_dim
DOMINO_SEED, EXTRA_SCALE, JETSPEC_SEED = 28, 2.0, 16
DOMINO_CFG = copy.deepcopy(DRAFT_CFG)
DOMINO_CFG["dflash_config"].update({"projector_type": "domino", "emb_dim": E,
                                    "gru_hidden_dim": G, "pure_draft_prefix_len": 1,
                                    "shift_label": True})


def draft_hidden(cfg, p, tp, hidden, noise_ids, full_pos, allowed):
    """make_dflash_golden.draft_forward without the head: the final-norm hidden [B, Q, H]."""
    eps, S = cfg["rms_norm_eps"], hidden.shape[1]
    ctx = rms_norm(hidden @ p["fc.weight"].T, p["hidden_norm.weight"], eps)
    h = tp["model.embed_tokens.weight"][noise_ids]
    for i in range(cfg["num_hidden_layers"]):
        h = layer(cfg, p, f"layers.{i}.", h, ctx, full_pos[:, S:], full_pos, allowed)
    return rms_norm(h, p["norm.weight"], eps)


def block_targets(ids, loss_mask, anchors, keep, bs, label_start=0, doc_remaining=None):
    """§8.5: label a + label_start + k, in range of the row and (doc_remaining given) of the
    anchor's document; block_mask = keep * in_range * loss_mask[safe]."""
    S = ids.shape[1]
    off = label_start + torch.arange(bs)
    idx = anchors[..., None] + off
    in_range = idx < S
    if doc_remaining is not None:
        in_range &= off <= doc_remaining.gather(1, anchors)[..., None]
    safe = idx.clamp(max=S - 1).flatten(1)
    tgt = ids.gather(1, safe).view(idx.shape)
    lm = loss_mask.gather(1, safe).view(idx.shape)
    return tgt, keep[..., None].double() * in_range.double() * lm.double()


def gru(x, w_ih, w_hh):
    """Bias-free single-layer GRU over x [M, L, H] from h0 = 0, gate rows r, z, n (PyTorch's)."""
    h, out = x.new_zeros(x.shape[0], w_hh.shape[1]), []
    for t in range(x.shape[1]):
        xr, xz, xn = (x[:, t] @ w_ih.T).chunk(3, -1)
        hr, hz, hn = (h @ w_hh.T).chunk(3, -1)
        r, z = torch.sigmoid(xr + hr), torch.sigmoid(xz + hz)
        n = torch.tanh(xn + r * hn)
        h = (1 - z) * n + z * h
        out.append(h)
    return torch.stack(out, 1)


def first_corrected(p, shift):
    return p if shift else 1 + p


def decay_weights(bs, gamma, shift):
    """Slot weights of W = 1: shift_label exp(-k/gamma); unshifted slot 0 masked, exp(-(k-1)/g)."""
    k = torch.arange(bs, dtype=torch.float64)
    off = 0 if shift else 1
    w = torch.exp(-(k - off).clamp(min=0) / gamma)
    return w if shift else w * (k > 0).double()


def lambda_base(step, total, start, ratio):
    ds = max(1, int(total * ratio))
    return min(max(start * (1 - min(step / ds, 1)), 0.0), 1.0)


def kl_rows(teacher, student, T):
    """KL(softmax(teacher/T) || softmax(student/T)) over the last axis; p_v = 0 terms give 0."""
    p, logp = torch.softmax(teacher / T, -1), torch.log_softmax(teacher / T, -1)
    logq = torch.log_softmax(student / T, -1)
    return torch.where(p > 0, p * (logp - logq), torch.zeros_like(p)).sum(-1)


def assert_gap(lg, valid, what):
    top2 = lg.topk(2, -1).values
    gap = (top2[..., 0] - top2[..., 1])[valid]
    assert (gap > 1e-3).all(), f"{what}: argmax too close to a tie ({gap.min().item():.2e})"


def self_test():
    """The worked examples E13 (first corrected slot, decay, packed boundary, lambda) and E14."""
    T = torch.tensor
    assert [first_corrected(1, True), first_corrected(1, False), first_corrected(2, True)] == \
        [1, 2, 2]
    close = lambda a, b: all(abs(x - y) < 1e-6 for x, y in zip(a, b))  # noqa: E731
    assert close(decay_weights(4, 7.0, True).tolist(), [1, .866878, .751477, .651439])
    assert close(decay_weights(4, 7.0, False).tolist(), [0, 1, .866878, .751477])
    ids, lm = torch.arange(16)[None], torch.ones(1, 16, dtype=torch.long)
    rem = T([list(range(7, -1, -1)) * 2])  # documents 8 + 8
    _, m = block_targets(ids, lm, T([[4]]), T([[1]]), 4, 1, rem)
    _, m0 = block_targets(ids, lm, T([[4]]), T([[1]]), 4, 1)
    assert m.sum() == 3 and m0.sum() == 4
    lam = [lambda_base(0, 100, 1, 1.0), lambda_base(50, 100, 1, 1.0), lambda_base(100, 100, 1, 1.0),
           lambda_base(200, 100, 1, 1.0), lambda_base(50, 100, 1, 0.5),
           lambda_base(25, 100, 1, 0.5), lambda_base(0, 0, 1, 0.5)]
    assert close(lam, [1.0, 0.5, 0.0, 0.0, 0.0, 0.5, 1.0])
    t, s = T([[0.0, math.log(2), 0.0]], dtype=torch.float64), torch.zeros(1, 3).double()
    assert abs(kl_rows(t, s, 1.0).item() - 0.0588915) < 1e-7
    assert abs(kl_rows(t, s, 2.0).item() - 0.0142206) < 1e-7
    assert abs(kl_rows(t, s, 2.0).item() * 4 - 0.0568824) < 1e-7
    gather = (T([[2, 10]])[..., None] + torch.arange(1, 4) - 1).clamp(max=19)
    assert gather.tolist() == [[[2, 3, 4], [10, 11, 12]]]


def prologue(tcfg, tp, inputs, causal):
    """Target capture, noise ids, positions and the draft mask (JetSpec: in-block causal)."""
    ids, anchors, keep = inputs["input_ids"], inputs["anchors"], inputs["keep"]
    (B, S), N = ids.shape, anchors.shape[1]
    packed = "seq_lens" in inputs
    ctx_pos = inputs["position_ids"] if packed else torch.arange(S).expand(B, S)
    doc = doc_ids(inputs["seq_lens"], S) if packed else torch.zeros(B, S, dtype=torch.long)
    with torch.no_grad():
        hidden, last = target_hidden(tcfg, tp, ids, ctx_pos, doc)
        tlogits = rms_norm(last, tp["model.norm.weight"], tcfg["rms_norm_eps"]) @ \
            tp["lm_head.weight"].T
        if not packed:  # the capture path reproduces make_qwen_golden's target forward
            assert torch.allclose(tlogits, forward(tcfg, tp, ids, ctx_pos), rtol=0, atol=1e-12)
    noise = block_inputs(ids, anchors, keep, BS).flatten(1)
    draft_pos = (ctx_pos.gather(1, anchors)[..., None] + torch.arange(BS)).flatten(1)
    full_pos = torch.cat([ctx_pos, draft_pos], dim=1)
    allowed = dflash_mask(S, BS, anchors, keep, doc if packed else None)
    if causal:  # own-block key slot i' visible to slot i iff i' <= i
        slot = torch.arange(N * BS) % BS
        allowed[:, :, S:] &= slot[None, :] <= slot[:, None]
    return hidden, tlogits, noise, full_pos, allowed, packed


def summary(name, out):
    o = {k: v.item() for k, v in out.items()}
    text = ", ".join(f"{k} {v:.6f}" if "loss" in k else f"{k} {v:g}" for k, v in o.items())
    print(f"{name}: {text}")
    return o


def run_domino(name, tcfg, tp, dp, inputs, shift, p, lam):
    ids, loss_mask, anchors, keep = (inputs[k] for k in ["input_ids", "loss_mask", "anchors",
                                                         "keep"])
    (B, S), N, V, H = ids.shape, anchors.shape[1], tcfg["vocab_size"], tcfg["hidden_size"]
    hidden, _, noise, full_pos, allowed, packed = prologue(tcfg, tp, inputs, causal=False)
    tgt, bmask = block_targets(ids, loss_mask, anchors, keep, BS, 1 if shift else 0,
                               inputs["doc_remaining"] if packed else None)
    params = {k: v.float().double().requires_grad_() for k, v in dp.items()}
    hn = draft_hidden(DOMINO_CFG, params, tp, hidden, noise, full_pos, allowed).view(B, N, BS, H)
    base = hn @ tp["lm_head.weight"].T                                     # [B, N, bs, V]

    # GRU over the ground-truth prefix tokens of each block (teacher forcing), from h0 = 0.
    L = BS if shift else BS - 1
    pidx = (anchors[..., None] + torch.arange(L)).clamp(max=S - 1)
    prev = ids.gather(1, pidx.flatten(1)).view(B, N, L)
    x = tp["model.embed_tokens.weight"][prev].view(B * N, L, H)
    w_ih, w_hh = params["prefix_gru.weight_ih_l0"], params["prefix_gru.weight_hh_l0"]
    g = gru(x, w_ih, w_hh)
    with torch.no_grad():  # the hand recurrence is torch.nn.GRU's
        ref = torch.nn.GRU(H, G, num_layers=1, bias=False, batch_first=True, dtype=torch.float64)
        ref.weight_ih_l0.copy_(w_ih), ref.weight_hh_l0.copy_(w_hh)
        assert torch.allclose(ref(x)[0], g, rtol=0, atol=1e-12)
    g = g.view(B, N, L, G)
    state = g if shift else torch.cat([g.new_zeros(B, N, 1, G), g], 2)   # slot k: g[k] / g[k-1]

    # Correction head on slots k >= s.
    s = first_corrected(p, shift)
    z = torch.cat([hn, state], -1) @ params["embed_proj.0.weight"].T
    delta = torch.nn.functional.silu(z) @ params["embed_proj.2.weight"].T
    final = torch.where((torch.arange(BS) >= s)[:, None], base + delta, base)

    Wm = bmask * (1.0 if shift else (torch.arange(BS) > 0).double())
    w = Wm * decay_weights(BS, GAMMA, shift)
    valid = Wm > 0
    out = {}
    for tag, lg in (("final", final), ("base", base)):
        assert_gap(lg, valid, f"{name} {tag}")
        nll = -torch.log_softmax(lg, -1).gather(-1, tgt[..., None])[..., 0]
        pred = lg.argmax(-1)
        acc_sum, blocks = acceptance(pred, tgt, valid)
        out[tag] = {"loss": (nll * w).sum() / (w.sum() + 1e-6),
                    "correct": ((pred == tgt) & (Wm > 0.5)).sum().double(),
                    "accept": acc_sum.double(), "blocks": blocks.double()}
    f, b = out["final"], out["base"]
    metrics = {"loss": (1 - lam) * f["loss"] + lam * b["loss"], "loss_weight": w.sum(),
               "valid_tokens": Wm.sum(), "correct_tokens": f["correct"],
               "accept_len_sum": f["accept"], "valid_blocks": f["blocks"],
               "final_loss": f["loss"], "base_loss": b["loss"],
               "base_correct_tokens": b["correct"], "base_accept_len_sum": b["accept"]}
    grads = torch.autograd.grad(metrics["loss"], list(params.values()))
    res = {f"{name}.{k}": v for k, v in inputs.items()}
    res.update({f"{name}.{k}": v.detach().double().reshape(1) for k, v in metrics.items()})
    res[f"{name}.logits"] = final.detach().reshape(B * N * BS, V)
    res[f"{name}.base_logits"] = base.detach().reshape(B * N * BS, V)
    res.update({f"{name}.grad.{k}": gr for k, gr in zip(params, grads)})
    return res, summary(name, metrics), Wm


def run_jetspec(name, tcfg, tp, dp, inputs, T):
    ids, loss_mask, anchors, keep = (inputs[k] for k in ["input_ids", "loss_mask", "anchors",
                                                         "keep"])
    (B, S), N, V = ids.shape, anchors.shape[1], tcfg["vocab_size"]
    hidden, tlogits, noise, full_pos, allowed, _ = prologue(tcfg, tp, inputs, causal=True)
    _, bmask = block_targets(ids, loss_mask, anchors, keep, BS)
    valid = bmask[..., 1:] > 0.5                                           # slots 1..bs-1
    params = {k: v.float().double().requires_grad_() for k, v in dp.items()}
    hn = draft_hidden(DRAFT_CFG, params, tp, hidden, noise, full_pos, allowed)
    logits = (hn @ tp["lm_head.weight"].T).view(B, N, BS, V)
    student = logits[:, :, 1:]
    src = (anchors[..., None] + torch.arange(1, BS) - 1).clamp(max=S - 1)  # [B, N, bs-1]
    teacher = tlogits.gather(1, src.flatten(1)[..., None].expand(-1, -1, V)).view(B, N, BS - 1, V)
    assert_gap(student, valid, f"{name} student")
    assert_gap(teacher, valid, f"{name} teacher")
    kl = kl_rows(teacher, student, T)
    pred, tgt = student.argmax(-1), teacher.argmax(-1)
    acc_sum, blocks = acceptance(pred, tgt, valid)
    metrics = {"loss": kl[valid].mean() * T ** 2, "loss_weight": valid.sum().double(),
               "valid_tokens": valid.sum().double(),
               "correct_tokens": ((pred == tgt) & valid).sum().double(),
               "accept_len_sum": acc_sum.double(), "valid_blocks": blocks.double()}
    grads = torch.autograd.grad(metrics["loss"], list(params.values()))
    res = {f"{name}.{k}": v for k, v in inputs.items()}
    res.update({f"{name}.{k}": v.detach().double().reshape(1) for k, v in metrics.items()})
    res[f"{name}.logits"] = logits.detach().reshape(B * N * BS, V)
    res[f"{name}.target_logits"] = tlogits.reshape(B * S, V)
    res.update({f"{name}.grad.{k}": gr for k, gr in zip(params, grads)})
    return res, summary(name, metrics)


def make_inputs(gen):
    """Unpacked: B = 2, S = 16; packed: one row, documents 9 + 7. Anchors are per kind."""
    i64 = lambda x: torch.tensor(x, dtype=torch.int64)  # noqa: E731
    lm = torch.ones(2, 16, dtype=torch.int64)
    lm[0, :3], lm[1, :5], lm[0, 8] = 0, 0, 0
    unpacked = {"input_ids": torch.randint(0, MASK, (2, 16), generator=gen), "loss_mask": lm,
                "keep": i64([[1, 1, 1], [1, 1, 0]])}
    plm = torch.ones(1, 16, dtype=torch.int64)
    plm[0, [0, 1, 13]] = 0
    packed = {"input_ids": torch.randint(0, MASK, (1, 16), generator=gen), "loss_mask": plm,
              "position_ids": i64([list(range(9)) + list(range(7))]),
              "doc_remaining": i64([list(range(8, -1, -1)) + list(range(6, -1, -1))]),
              "seq_lens": i64([[9, 7]]), "keep": i64([[1, 1, 1, 1]])}
    return unpacked, packed, i64


def main():
    torch.set_num_threads(1)
    self_test()
    tdir = os.path.join(HERE, "qwen3_tiny")
    with open(os.path.join(tdir, "config.json")) as f:
        tcfg = json.load(f)
    tp = {k: v.double() for k, v in
          load_f32_safetensors(os.path.join(tdir, "model.safetensors")).items()}

    # Domino draft: the DFlash parameters, then the GRU and the correction head (scaled so that
    # the correction visibly moves the logits), then the inputs, all from one generator.
    gen = torch.Generator().manual_seed(DOMINO_SEED)
    dp = make_draft_params(DOMINO_CFG, gen)
    H, V = DOMINO_CFG["hidden_size"], DOMINO_CFG["vocab_size"]
    for name, shape in [("prefix_gru.weight_ih_l0", (3 * G, H)),
                        ("prefix_gru.weight_hh_l0", (3 * G, G)),
                        ("embed_proj.0.weight", (E, H + G)), ("embed_proj.2.weight", (V, E))]:
        dp[name] = torch.randn(*shape, generator=gen, dtype=torch.float64) * \
            (EXTRA_SCALE / math.sqrt(shape[-1]))
    out_dir = os.path.join(HERE, "domino_tiny")
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(DOMINO_CFG, f, indent=2)
    save_safetensors(os.path.join(out_dir, "model.safetensors"),
                     {k: v.float() for k, v in dp.items()})
    unpacked, packed, i64 = make_inputs(gen)
    d_unpacked = dict(unpacked, anchors=i64([[2, 6, 12], [5, 8, 0]]))
    d_packed = dict(packed, anchors=i64([[2, 5, 9, 11]]))

    # JetSpec: the DFlash golden draft, its own inputs.
    jp = load_f32_safetensors(os.path.join(HERE, "dflash_tiny", "model.safetensors"))
    unpacked, packed, _ = make_inputs(torch.Generator().manual_seed(JETSPEC_SEED))
    j_unpacked = dict(unpacked, anchors=i64([[2, 6, 9], [5, 8, 0]]))
    j_packed = dict(packed, anchors=i64([[2, 5, 9, 12]]))

    lam, expected, meta, nums = 0.25, {}, {}, {}
    common = {"block_size": BS, "mask_token_id": MASK}
    dom = ("domino: W = block_mask*(shift ? 1 : [k>0]), w = W*exp(-max(k-off,0)/gamma), "
           "loss = (1-lambda)*final_loss + lambda*base_loss")
    for name, inputs, shift, text in [
            ("domino_unpacked", d_unpacked, True, "shift_label; row 0 block 2 (anchor 12) loses "
             "label 16 (out of range); row 1 block 2 dropped; loss_mask 0 at row 0 pos 8"),
            ("domino_packed", d_packed, True, "shift_label, documents 9 + 7, block targets with "
             "doc_remaining: anchor 5 loses its label at 9 (document 1)"),
            ("domino_unshifted", d_unpacked, False, "the unpacked inputs, shift_label false: "
             "label_start 0, slot 0 masked, GRU over slots 0..bs-2, state_k = g[k-1], s = 2")]:
        res, nums[name], Wm = run_domino(name, tcfg, tp, dp, inputs, shift, 1, lam)
        expected.update(res)
        meta[name] = {"kind": "domino", "gamma": GAMMA, "lambda_base": lam,
                      "shift_label": shift, "pure_draft_prefix_len": 1, "kd_temperature": None,
                      **common, "about": dom + "; " + text}
        if name == "domino_packed":  # the block at anchor 5 loses its 4th shifted label
            _, m0 = block_targets(inputs["input_ids"], inputs["loss_mask"], inputs["anchors"],
                                  inputs["keep"], BS, 1)
            assert Wm[0, 1].sum() == 3 and m0[0, 1].sum() == 4 and Wm.sum() < m0.sum()
            print(f"  boundary: valid_tokens {Wm.sum().item():g} (unpacked rule "
                  f"{m0.sum().item():g}); anchor-5 block {Wm[0, 1].tolist()}")
    jet = "jetspec: in-block causal mask, loss = mean(KL(p_T || q_T) over valid)*T^2"
    for name, inputs, T, text in [
            ("jetspec_unpacked", j_unpacked, 1.0, "target causal; row 1 block 2 dropped"),
            ("jetspec_packed", j_packed, 2.0, "documents 9 + 7, target document-causal; "
             "anchors in both documents")]:
        res, nums[name] = run_jetspec(name, tcfg, tp, jp, inputs, T)
        expected.update(res)
        meta[name] = {"kind": "jetspec", "gamma": None, "lambda_base": None,
                      "shift_label": None, "pure_draft_prefix_len": None, "kd_temperature": T,
                      **common, "about": jet + "; " + text}
    meta = {"cases": json.dumps(meta), "target": "qwen3_tiny",
            "drafts": json.dumps({"domino": "domino_tiny", "jetspec": "dflash_tiny"}),
            "grads": "grad.<param>: d loss / d param (the micro-batch mean), float64"}
    save_safetensors(os.path.join(HERE, "draft_heads_expected.safetensors"), expected, meta)
    return nums


if __name__ == "__main__":
    main()
