#!/usr/bin/env python3
"""Writes the golden EAGLE-3 draft fixtures that sprig's C++ tests compare against.

An independent float64 PyTorch implementation of EAGLE-3 draft training with the training-time
test (TTT): the existing tests/golden/qwen3_tiny target (read only) gives the residual stream after
decoder layers AUX_LAYER_IDS (concatenated on features) and its logits; a one-layer Llama-style
draft (no q/k norm, no biases) runs TTT_STEPS steps. Step k reads the token k + 1 ahead
(id 0 past the row) and the states of step k - 1 (step 0: fc of the target's states), rotates at
positions pos + k, and attends to the step-0 keys causally within the document and to its own
position's keys of steps 1..k. Position t of step k learns the target's softmax over the draft
vocabulary at t + 1 + k (soft cross-entropy); step k weighs DECAY^k. Packed rows follow the dflash
packing (docs/semantics.md §4.5). The "reduced" case uses a 40-id draft vocabulary, the rows
`selected` of lm_head.weight, and skips positions whose target argmax lies outside it.

Writes:
    tests/golden/eagle3_tiny/model.safetensors      random draft, F32, LlamaForCausalLMEagle3 names
    tests/golden/eagle3_tiny_expected.safetensors   per case "<case>.<name>": inputs (I64), the
        target's aux [B, S, 2H] and target_logits [B, S, V], loss / step_loss / step_loss_sum /
        step_valid / step_correct / accept_len_sum / valid_positions, logits [K*B*S, Vd]
        (step-major, then row, then position) and grad.<param> for every trained parameter (F64);
        metadata "cases".

Regenerate (Debian's python3-torch, CPU):
    /usr/bin/python3 tests/golden/make_eagle3_golden.py
"""

import json
import math
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from make_qwen_golden import forward, head_dim, rms_norm, rope, save_safetensors  # noqa: E402
from make_dflash_golden import (TARGET_LAYER_IDS, acceptance, doc_ids,  # noqa: E402
                                load_f32_safetensors, target_hidden)

AUX_LAYER_IDS, TTT_STEPS, DECAY, STD, VD, SEED = [0, 1], 3, 0.8, 0.15, 40, 392
assert AUX_LAYER_IDS == TARGET_LAYER_IDS  # the layers target_hidden captures
LAYER = "model.layers.0."
FROZEN = "model.embed_tokens.weight"


def make_draft_params(cfg, embed, gen):
    """N(0, STD) matrices, 1 + N(0, 0.1) norms, in this order of draws; the target's embedding."""
    H, I, V = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    nH, nKV, D, L = (cfg["num_attention_heads"], cfg["num_key_value_heads"], head_dim(cfg),
                     len(AUX_LAYER_IDS))
    shapes = [("model.fc", (H, L * H)), (LAYER + "input_layernorm", (H,)),
              (LAYER + "hidden_norm", (H,)), (LAYER + "self_attn.q_proj", (nH * D, 2 * H)),
              (LAYER + "self_attn.k_proj", (nKV * D, 2 * H)),
              (LAYER + "self_attn.v_proj", (nKV * D, 2 * H)),
              (LAYER + "self_attn.o_proj", (H, nH * D)), (LAYER + "post_attention_layernorm", (H,)),
              (LAYER + "mlp.gate_proj", (I, H)), (LAYER + "mlp.up_proj", (I, H)),
              (LAYER + "mlp.down_proj", (H, I)), ("model.norm", (H,)), ("lm_head", (V, H))]
    p = {FROZEN: embed.clone()}
    for name, shape in shapes:
        x = torch.randn(*shape, generator=gen, dtype=torch.float64)
        p[name + ".weight"] = 1.0 + 0.1 * x if len(shape) == 1 else STD * x
    return p


def ttt_mask(doc, step):
    """[B, S, (step+1)*S] bool over keys [step 0 | step 1 | ... | step `step`]: the step-0 keys
    causally within the query's document, and the query's own position of every later step."""
    S = doc.shape[1]
    ctx = torch.ones(S, S, dtype=torch.bool).tril() & (doc[:, :, None] == doc[:, None, :])
    return torch.cat([ctx] + [torch.eye(S, dtype=torch.bool).expand_as(ctx)] * step, dim=-1)


def attend(q, k, v, allowed):
    """q [B, Q, nH, D], k / v [B, KV, nH, D], allowed [B, Q, KV] -> [B, Q, nH, D]."""
    s = torch.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(q.shape[-1])
    s = s.masked_fill(~allowed[:, None], float("-inf"))
    return torch.einsum("bhqk,bkhd->bqhd", s.softmax(-1), v)


def draft_step(cfg, p, ids, h_prev, pos, keys, allowed):
    """One TTT step: the layer's output [B, S, H]; appends this step's (k, v) to `keys`."""
    (B, S), eps, theta = ids.shape, cfg["rms_norm_eps"], cfg["rope_theta"]
    nH, nKV, D = cfg["num_attention_heads"], cfg["num_key_value_heads"], head_dim(cfg)
    x = torch.cat([rms_norm(p[FROZEN][ids], p[LAYER + "input_layernorm.weight"], eps),
                   rms_norm(h_prev, p[LAYER + "hidden_norm.weight"], eps)], dim=-1)

    def proj(name, n):
        return (x @ p[LAYER + f"self_attn.{name}_proj.weight"].T).view(B, S, n, D)

    g = nH // nKV  # kv head j serves query heads g*j .. g*j + g - 1
    keys.append((rope(proj("k", nKV), pos, theta).repeat_interleave(g, dim=2),
                 proj("v", nKV).repeat_interleave(g, dim=2)))
    k, v = (torch.cat(t, dim=1) for t in zip(*keys))
    a = attend(rope(proj("q", nH), pos, theta), k, v, allowed).reshape(B, S, nH * D)
    h = h_prev + a @ p[LAYER + "self_attn.o_proj.weight"].T
    y = rms_norm(h, p[LAYER + "post_attention_layernorm.weight"], eps)
    gate, up = y @ p[LAYER + "mlp.gate_proj.weight"].T, y @ p[LAYER + "mlp.up_proj.weight"].T
    return h + (torch.nn.functional.silu(gate) * up) @ p[LAYER + "mlp.down_proj.weight"].T


def shifted(x, k):
    """x[:, t + 1 + k], 0 where t + 1 + k >= S."""
    S = x.shape[1]
    r = torch.arange(S) + 1 + k
    inside = (r < S).view(S, *[1] * (x.dim() - 2))
    return torch.where(inside, x[:, r.clamp(max=S - 1)], torch.zeros_like(x[:, :1]))


def ttt_forward(cfg, p, aux, ids, pos, doc):
    """Every step's logits [K, B, S, Vd] (Vd: the rows of p["lm_head.weight"])."""
    h, keys, logits = aux @ p["model.fc.weight"].T, [], []
    for k in range(TTT_STEPS):
        h = draft_step(cfg, p, shifted(ids, k), h, pos + k, keys, ttt_mask(doc, k))
        logits.append(rms_norm(h, p["model.norm.weight"], cfg["rms_norm_eps"])
                      @ p["lm_head.weight"].T)
    return torch.stack(logits)


def ttt_loss(logits, full, selected, loss_mask, doc_remaining=None):
    """Decay-weighted soft cross-entropy against the target's softmax over `selected`, per-step
    sums and counts over all rows, argmax accuracy and acceptance (make_dflash_golden's rule over
    the K steps of each position). Also the smallest top-2 gaps of draft and teacher (valid)."""
    K, S = logits.shape[0], loss_mask.shape[1]
    teacher = full[..., selected]
    p, in_vocab = teacher.softmax(-1), torch.isin(full.argmax(-1), selected)
    out = {n: [] for n in ["step_loss", "step_loss_sum", "step_valid", "step_correct"]}
    preds, tgts, valids, gaps = [], [], [], []
    for k in range(K):
        valid = (torch.arange(S) + 1 + k < S) & (shifted(loss_mask, k) == 1) & shifted(in_vocab, k)
        if doc_remaining is not None:
            valid &= k < doc_remaining
        ce = -(shifted(p, k) * logits[k].log_softmax(-1)).sum(-1)
        pred, tgt = logits[k].argmax(-1), shifted(teacher, k).argmax(-1)
        n = valid.sum().double()
        out["step_loss_sum"].append((ce * valid).sum())
        out["step_loss"].append(out["step_loss_sum"][-1] / n.clamp(min=1))
        out["step_valid"].append(n)
        out["step_correct"].append(((pred == tgt) & valid).sum().double())
        for lg in (logits[k].detach(), shifted(teacher, k)):
            top2 = lg.topk(2, -1).values
            gaps.append((top2[..., 0] - top2[..., 1])[valid].min() if valid.any() else math.inf)
        preds.append(pred), tgts.append(tgt), valids.append(valid)
    full_gap = full.topk(2, -1).values  # in_vocab reads the full argmax
    assert (full_gap[..., 0] - full_gap[..., 1]).min() > 1e-3, "target argmax too close to a tie"
    out = {n: torch.stack(v) for n, v in out.items()}
    w = DECAY ** torch.arange(K, dtype=torch.float64)
    out["loss"] = (w * out["step_loss"]).sum() / w.sum()
    acc, blocks = acceptance(*(torch.stack(x, -1) for x in (preds, tgts, valids)))
    out["accept_len_sum"], out["valid_positions"] = acc.double(), blocks.double()
    gap = (min(gaps[0::2]), min(gaps[1::2]))
    assert min(gap) > 1e-3, "argmax too close to a tie"
    return out, gap


def self_test():
    """ttt_mask on a worked example; attend against a per-query loop (step 0: plain causal)."""
    doc = doc_ids(torch.tensor([[2, 2]]), 4)
    rows = ["".join(map(str, r)) for r in ttt_mask(doc, 2)[0].int().tolist()]
    assert rows == ["100010001000", "110001000100", "001000100010", "001100010001"]
    gen = torch.Generator().manual_seed(7)
    B, S, nH, D = 2, 5, 3, 8
    doc = doc_ids(torch.tensor([[S, 0], [2, 3]]), S)
    q = torch.randn(B, S, nH, D, generator=gen, dtype=torch.float64)
    ks, vs = (torch.randn(3, B, S, nH, D, generator=gen, dtype=torch.float64) for _ in range(2))
    for step in (0, 2):
        got = attend(q, ks[:step + 1].transpose(0, 1).flatten(1, 2),
                     vs[:step + 1].transpose(0, 1).flatten(1, 2), ttt_mask(doc, step))
        for b in range(B):
            for t in range(S):
                ctx = [s for s in range(t + 1) if doc[b, s] == doc[b, t]]
                key = torch.stack([ks[0, b, s] for s in ctx] + [ks[i, b, t] for i in
                                                                range(1, step + 1)])
                val = torch.stack([vs[0, b, s] for s in ctx] + [vs[i, b, t] for i in
                                                                range(1, step + 1)])
                w = (torch.einsum("hd,khd->hk", q[b, t], key) / math.sqrt(D)).softmax(-1)
                assert torch.allclose(got[b, t], torch.einsum("hk,khd->hd", w, val),
                                      rtol=0, atol=1e-13)


def run_case(tcfg, tp, dp, inputs, selected):
    """The target's states, then the draft's TTT loss and gradients on f32-rounded weights."""
    ids, loss_mask = inputs["input_ids"], inputs["loss_mask"]
    (B, S), packed = ids.shape, "seq_lens" in inputs
    pos = inputs["position_ids"] if packed else torch.arange(S).expand(B, S)
    doc = doc_ids(inputs["seq_lens"], S) if packed else torch.zeros(B, S, dtype=torch.long)
    with torch.no_grad():
        aux, last = target_hidden(tcfg, tp, ids, pos, doc)
        full = rms_norm(last, tp["model.norm.weight"], tcfg["rms_norm_eps"])
        full = full @ tp["lm_head.weight"].T
        if not packed:  # the capture path reproduces make_qwen_golden's forward
            assert torch.allclose(full, forward(tcfg, tp, ids, pos), rtol=0, atol=1e-12)
    p = {k: v.float().double() for k, v in dp.items()}
    p["lm_head.weight"] = p["lm_head.weight"][selected]
    trained = [k for k in p if k != FROZEN]
    for k in trained:
        p[k].requires_grad_()
    logits = ttt_forward(tcfg, p, aux, ids, pos, doc)
    out, gap = ttt_loss(logits, full, selected, loss_mask,
                        inputs["doc_remaining"] if packed else None)
    grads = torch.autograd.grad(out["loss"], [p[k] for k in trained])
    res = dict(inputs, aux=aux, target_logits=full, logits=logits.detach().flatten(0, 2))
    res.update({k: v.detach().reshape(-1 if v.dim() else 1) for k, v in out.items()})
    res.update({"grad." + k: g for k, g in zip(trained, grads)})
    return res, gap


def check_packed_by_documents(tcfg, tp, dp, inputs, res):
    """Each document of the packed row (the last with its padding) run alone as an unpacked row
    gives the same logits on the slots whose input token lies in its document, and its sums and
    counts add up to the packed row's."""
    starts, V = [0] + inputs["seq_lens"][0].cumsum(0).tolist(), tcfg["vocab_size"]
    S, sums = starts[-1], {}
    packed_logits = res["logits"].view(TTT_STEPS, S, V)
    for a, b in zip(starts[:-1], starts[1:]):
        alone = {n: inputs[n][:, a:b] for n in ["input_ids", "loss_mask"]}
        one, _ = run_case(tcfg, tp, dp, alone, torch.arange(V))
        lg = one["logits"].view(TTT_STEPS, b - a, V)
        for k in range(TTT_STEPS):
            n = max(b - a - 1 - k, 0)  # t + 1 + k inside the document
            assert torch.allclose(lg[k, :n], packed_logits[k, a:a + n], rtol=0, atol=1e-10)
        for name in ["step_loss_sum", "step_valid", "step_correct", "accept_len_sum",
                     "valid_positions"]:
            sums[name] = sums.get(name, 0) + one[name]
    for name, v in sums.items():
        assert torch.allclose(v, res[name], rtol=0, atol=1e-10), name


def main():
    torch.set_num_threads(1)
    self_test()
    tdir = os.path.join(HERE, "qwen3_tiny")
    with open(os.path.join(tdir, "config.json")) as f:
        tcfg = json.load(f)  # the draft's layer has the target's shapes
    tp = {k: v.double() for k, v in
          load_f32_safetensors(os.path.join(tdir, "model.safetensors")).items()}
    V = tcfg["vocab_size"]

    # Seed picked so that every case has a correctly predicted valid slot and an accepted run
    # beyond the bonus token (random drafts rarely hit: V = 96).
    gen = torch.Generator().manual_seed(SEED)
    dp = make_draft_params(tcfg, tp[FROZEN], gen)
    os.makedirs(os.path.join(HERE, "eagle3_tiny"), exist_ok=True)
    save_safetensors(os.path.join(HERE, "eagle3_tiny", "model.safetensors"),
                     {k: v.float() for k, v in dp.items()})

    i64 = lambda x: torch.tensor(x, dtype=torch.int64)  # noqa: E731
    lm = torch.ones(2, 12, dtype=torch.int64)
    lm[0, :3], lm[1, 6] = 0, 0
    unpacked = {"input_ids": torch.randint(0, V, (2, 12), generator=gen), "loss_mask": lm}
    pids = torch.randint(0, V, (1, 14), generator=gen)
    pids[0, 12:] = 0  # padding: pad id 0, loss_mask 0, positions continue the last document
    plm = torch.ones(1, 14, dtype=torch.int64)
    plm[0, [0, 7, 12, 13]] = 0
    packed = {"input_ids": pids, "loss_mask": plm,
              "position_ids": i64([[0, 1, 2, 3, 4, 0, 1, 2, 3, 0, 1, 2, 3, 4]]),
              "doc_remaining": i64([[4, 3, 2, 1, 0, 3, 2, 1, 0, 2, 1, 0, 0, 0]]),
              "seq_lens": i64([[5, 4, 5]])}

    expected, meta, full_vocab = {}, {}, torch.arange(V)
    results = {"unpacked": run_case(tcfg, tp, dp, unpacked, full_vocab),
               "packed": run_case(tcfg, tp, dp, packed, full_vocab)}
    check_packed_by_documents(tcfg, tp, dp, packed, results["packed"][0])

    # Draft vocabulary: the target's argmaxes over the unpacked rows but one (read by a supervised
    # position), topped up with other ids, ascending.
    top = results["unpacked"][0]["target_logits"].argmax(-1)
    drop = top[1][lm[1] == 1][-1].item()
    keep = [i for i in top.unique().tolist() if i != drop]
    others = [i for i in torch.randperm(V, generator=gen).tolist() if i not in keep + [drop]]
    selected = torch.tensor(sorted(keep + others[:VD - len(keep)]), dtype=torch.int64)
    results["reduced"] = run_case(tcfg, tp, dp, dict(unpacked, selected=selected), selected)
    red, unp = results["reduced"][0], results["unpacked"][0]
    assert torch.equal(red["logits"], unp["logits"][:, selected])  # the head's rows, no more
    assert (red["step_valid"] < unp["step_valid"]).any()  # in_vocab drops a supervised position

    for name, (res, gap) in results.items():
        expected.update({f"{name}.{k}": v for k, v in res.items()})
        meta[name] = {"ttt_steps": TTT_STEPS, "aux_layer_ids": AUX_LAYER_IDS,
                      "draft_vocab_size": res["logits"].shape[1]}
        r = {k: res[k].tolist() for k in ["loss", "step_loss", "step_valid", "step_correct",
                                          "accept_len_sum", "valid_positions"]}
        print(f"{name}: loss {r['loss'][0]:.6f}, step_loss "
              f"{[round(x, 6) for x in r['step_loss']]}, valid {r['step_valid']}, correct "
              f"{r['step_correct']}, accept {r['accept_len_sum'][0]:g}/{r['valid_positions'][0]:g}"
              f", min top-2 gap draft {gap[0]:.4f} teacher {gap[1]:.4f}")
    meta = {"cases": json.dumps(meta), "target": "qwen3_tiny", "draft": "eagle3_tiny",
            "grads": "grad.<param>: d loss / d param, float64"}
    save_safetensors(os.path.join(HERE, "eagle3_tiny_expected.safetensors"), expected, meta)


if __name__ == "__main__":
    main()
