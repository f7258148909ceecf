"""The attention masks of `sprig bench attention` rebuilt in PyTorch from their JSON specs.

Shared by attention_cpu_vs_torch.py and attention_vs_torch.py. A spec (the "spec" field of each
`sprig bench attention --json` row, the format of attention/mask_io.h) becomes a predicate
allowed(q, k) on broadcastable integer tensors of query and key indices, written with the rules
of docs/semantics.md §2.4, §2.5 and §2.7 rather than with sprig's rectangles, so that a wrong
sprig mask shows up as a disagreement in the allowed-element count. The same predicate gives the
dense mask (CPU) and FlexAttention's mask_mod (GPU).
"""


def mask_shape(spec):
    """(queries, keys) of the mask."""
    kind = spec["kind"]
    if kind == "causal":
        return spec["length"], spec["length"]
    if kind == "documents":
        n = spec.get("length", sum(spec["seq_lens"]))
        return n, n
    if kind == "prefix_tree":
        n = sum(spec["node_lengths"])
        return n, n
    if kind == "dflash":
        slots = len(spec["anchors"]) * spec["block_size"]
        return slots, spec["ctx_len"] + slots
    raise ValueError(f"unknown mask kind {kind!r}")


def allowed_fn(torch, spec, device="cpu"):
    """The predicate allowed(q, k) -> bool tensor of the spec (tables live on `device`)."""
    kind = spec["kind"]
    if spec.get("sliding_window") or (kind == "dflash" and spec.get("seq_lens")):
        raise ValueError("sliding windows and document-aware DFlash are not benchmarked")
    if kind == "causal":
        return lambda q, k: k <= q
    if kind == "documents":
        # Document id per token; padding beyond the sum joins the last document
        # (docs/semantics.md §4.5).
        n = mask_shape(spec)[0]
        lens = [x for x in spec["seq_lens"] if x > 0]
        lens[-1] += n - sum(lens)
        doc = torch.repeat_interleave(torch.arange(len(lens)), torch.tensor(lens)).to(device)
        return lambda q, k: (doc[q] == doc[k]) & (k <= q)
    if kind == "prefix_tree":
        # Node per token; ancestor[u, a]: node a comes before u on some sample path
        # (docs/semantics.md §2.5).
        lens = spec["node_lengths"]
        node = torch.repeat_interleave(torch.arange(len(lens)), torch.tensor(lens)).to(device)
        ancestor = torch.zeros(len(lens), len(lens), dtype=torch.bool)
        for path in spec["sample_paths"]:
            for i, u in enumerate(path):
                ancestor[u, path[:i]] = True
        ancestor = ancestor.to(device)
        return lambda q, k: ((node[q] == node[k]) & (k <= q)) | ancestor[node[q], node[k]]
    if kind == "dflash":
        # Slot (j, i) = query j * bs + i sees the context strictly before anchor j when block j is
        # kept, and the slots of its own block (offsets <= i when causal) (docs/semantics.md §2.7).
        ctx, bs, causal = spec["ctx_len"], spec["block_size"], spec.get("causal", False)
        anchor = torch.tensor(spec["anchors"]).to(device)
        keep = torch.tensor([bool(x) for x in spec["keep"]]).to(device)

        def allowed(q, k):
            j = q // bs
            slot = (k - ctx).clamp(min=0)
            own = (k >= ctx) & (slot // bs == j)
            if causal:
                own = own & (slot % bs <= q % bs)
            return ((k < ctx) & keep[j] & (k < anchor[j])) | own

        return allowed
    raise ValueError(f"unknown mask kind {kind!r}")


def dense_mask(torch, spec):
    """The mask as a dense bool tensor [queries, keys] on the CPU."""
    nq, nk = mask_shape(spec)
    return allowed_fn(torch, spec)(torch.arange(nq)[:, None], torch.arange(nk)[None, :])


def count_allowed(torch, spec, device="cpu", chunk=1024):
    """Allowed elements of the mask, evaluated `chunk` query rows at a time."""
    nq, nk = mask_shape(spec)
    allowed = allowed_fn(torch, spec, device)
    keys = torch.arange(nk, device=device)[None, :]
    return sum(int(allowed(torch.arange(q0, min(q0 + chunk, nq), device=device)[:, None],
                           keys).sum()) for q0 in range(0, nq, chunk))


def time_median(fn, warmup, reps, sync=lambda: None):
    """Median wall seconds of fn() over `reps` calls after `warmup` untimed calls."""
    import time
    for _ in range(warmup):
        fn()
    sync()
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - start)
    times.sort()
    return times[len(times) // 2]


def run_sprig(sprig, args, env=None):
    """The rows of `sprig bench attention --json ARGS` as dicts."""
    import json
    import subprocess
    out = subprocess.run([sprig, "bench", "attention", "--json", *args], env=env, check=True,
                         capture_output=True, text=True).stdout
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]
