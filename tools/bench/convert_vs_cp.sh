#!/usr/bin/env bash
# `sprig convert --from-hf` of a ~1 GB checkpoint against `cp -r` of the same files.
#
# Writes a random bf16 Qwen2-shaped checkpoint in Hugging Face layout (config.json, two shards and
# model.safetensors.index.json; H=2048, 8 layers, 16/4 heads, I=5632, V=32000, untied: 492M
# parameters, 984 MB), then times `cp -r` of the directory and `sprig convert --from-hf` of it.
# The page cache cannot be dropped here, so each runs twice and the second (warm) run counts.
# Conversion is I/O bound: target <= 2x cp's time.
#
# Usage: tools/bench/convert_vs_cp.sh [path/to/sprig] [work dir, default a fresh one under /tmp]
set -euo pipefail

SPRIG=${1:-build/tools/sprig}
WORK=${2:-$(mktemp -d /tmp/sprig_convert_bench.XXXXXX)}
trap 'rm -rf "$WORK"' EXIT

python3 - "$WORK/hf" <<'EOF'
import json, os, struct, sys

out = sys.argv[1]
os.makedirs(out)
H, I, V, L, nH, nKV, D = 2048, 5632, 32000, 8, 16, 4, 128
config = dict(model_type="qwen2", architectures=["Qwen2ForCausalLM"], vocab_size=V, hidden_size=H,
              intermediate_size=I, num_hidden_layers=L, num_attention_heads=nH,
              num_key_value_heads=nKV, tie_word_embeddings=False, torch_dtype="bfloat16")
with open(os.path.join(out, "config.json"), "w") as f:
    json.dump(config, f, indent=2)

shapes = {"model.embed_tokens.weight": [V, H]}
for i in range(L):
    p = f"model.layers.{i}."
    shapes.update({p + "input_layernorm.weight": [H], p + "post_attention_layernorm.weight": [H],
                   p + "self_attn.q_proj.weight": [nH * D, H], p + "self_attn.q_proj.bias": [nH * D],
                   p + "self_attn.k_proj.weight": [nKV * D, H], p + "self_attn.k_proj.bias": [nKV * D],
                   p + "self_attn.v_proj.weight": [nKV * D, H], p + "self_attn.v_proj.bias": [nKV * D],
                   p + "self_attn.o_proj.weight": [H, nH * D], p + "mlp.gate_proj.weight": [I, H],
                   p + "mlp.up_proj.weight": [I, H], p + "mlp.down_proj.weight": [H, I]})
shapes.update({"model.norm.weight": [H], "lm_head.weight": [V, H]})

names = list(shapes)
halves = [names[: len(names) // 2], names[len(names) // 2:]]
weight_map, total = {}, 0
for s, part in enumerate(halves):
    file = f"model-0000{s + 1}-of-00002.safetensors"
    header, offset = {"__metadata__": {"format": "pt"}}, 0
    for name in part:
        n = 2
        for d in shapes[name]:
            n *= d
        header[name] = {"dtype": "BF16", "shape": shapes[name], "data_offsets": [offset, offset + n]}
        offset += n
        weight_map[name] = file
    total += offset
    text = json.dumps(header)
    text += " " * ((8 - len(text) % 8) % 8)
    with open(os.path.join(out, file), "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text.encode())
        for name in part:
            f.write(os.urandom(header[name]["data_offsets"][1] - header[name]["data_offsets"][0]))
with open(os.path.join(out, "model.safetensors.index.json"), "w") as f:
    json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2)
print(f"wrote {total / 1e6:.0f} MB of bf16 tensors in {len(names)} tensors, 2 shards")
EOF

# Wall seconds of a command (its output discarded).
seconds() {
  local start end
  start=$(date +%s%N)
  "$@" >/dev/null
  end=$(date +%s%N)
  awk -v ns=$((end - start)) 'BEGIN { printf "%.3f", ns / 1e9 }'
}

for run in 1 2; do
  rm -rf "$WORK/cp" "$WORK/sprig"
  cp_s=$(seconds cp -r "$WORK/hf" "$WORK/cp")
  convert_s=$(seconds "$SPRIG" convert --from-hf "$WORK/hf" --out "$WORK/sprig")
  echo "run $run: cp -r ${cp_s} s, sprig convert ${convert_s} s"
done
echo "input $(du -sb "$WORK/hf" | cut -f1) bytes, sprig checkpoint $(du -sb "$WORK/sprig" | cut -f1) bytes"
awk -v c="$convert_s" -v p="$cp_s" \
  'BEGIN { printf "sprig convert / cp: %.2fx (target <= 2x)\n", c / p }'
