#!/usr/bin/env bash
# Writes the table of docs/what-fits.md: `sprig plan` for Qwen3-0.6B .. 32B SFT at 4k and 16k
# tokens and for DFlash and Domino drafts of Qwen3-8B and 32B targets, on 1 and 8 H200s, with each
# memory option. Reads the models' shapes from the config.json files written below (Qwen/Qwen3-*
# on the Hugging Face Hub), so it needs no weights and no GPU.
#   tools/plan_table.sh [SPRIG]        SPRIG: the sprig binary (default build/tools/sprig)
set -euo pipefail
cd "$(dirname "$0")/.."
sprig=${1:-build/tools/sprig}
[[ -x $sprig ]] || { echo "plan_table.sh: no sprig binary at $sprig (build it first)" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# name hidden intermediate layers heads tied
while read -r name hidden intermediate layers heads tied; do
  cat > "$work/$name.json" <<EOF
{"model_type": "qwen3", "architectures": ["Qwen3ForCausalLM"], "vocab_size": 151936,
 "hidden_size": $hidden, "intermediate_size": $intermediate, "num_hidden_layers": $layers,
 "num_attention_heads": $heads, "num_key_value_heads": 8, "head_dim": 128,
 "rms_norm_eps": 1e-6, "rope_theta": 1000000, "max_position_embeddings": 40960,
 "tie_word_embeddings": $tied, "torch_dtype": "bfloat16"}
EOF
done <<'MODELS'
Qwen3-0.6B 1024 3072 28 16 true
Qwen3-1.7B 2048 6144 28 16 true
Qwen3-4B 2560 9728 36 32 true
Qwen3-8B 4096 12288 36 32 false
Qwen3-14B 5120 17408 40 40 false
Qwen3-32B 5120 25600 64 64 false
MODELS

# One cell: the per-rank total of `sprig plan` and whether it fits one H200.
cell() {
  local out
  out=$("$sprig" plan --gpu h200 "$@" | awk '/^  total/ {
    printf "%s %s", $2, ($0 ~ /does not fit/) ? "no" : "**fits**" }')
  echo "$out"
}

# A row: the options' cells for a config on 1 and 8 GPUs.
row() {
  local label=$1
  shift
  for gpus in 1 8; do
    local cells=()
    for option in none layers optimizer gradients layers+gradients; do
      local args=(--gpus "$gpus")
      case $option in
        layers) args+=(--train.activation_checkpointing=layers) ;;
        optimizer | gradients) args+=(--train.shard=$option) ;;
        layers+gradients) args+=(--train.activation_checkpointing=layers --train.shard=gradients) ;;
      esac
      if [[ $gpus == 1 && $option != none && $option != layers ]]; then
        cells+=("—")
      else
        cells+=("$(cell "$@" "${args[@]}")")
      fi
    done
    local IFS='|'
    echo "| $label | $gpus |${cells[*]}|"
  done
}

echo "| step | H200s | none | checkpointing layers | shard optimizer | shard gradients | layers + shard gradients |"
echo "|---|---|---|---|---|---|---|"
for model in Qwen3-0.6B Qwen3-1.7B Qwen3-4B Qwen3-8B Qwen3-14B Qwen3-32B; do
  for tokens in 4096 16384; do
    row "SFT $model, 1 x $tokens tokens" -c train/configs/tiny_sft.yaml --recipe sft \
      --model.config="$work/$model.json" --data.seq_len=$tokens --data.micro_batch_size=1
  done
done
for target in Qwen3-8B Qwen3-32B; do
  for kind in dflash domino; do
    row "$kind draft (5 layers, 256 blocks of 16) of $target, 1 x 4096 tokens" \
      -c train/configs/tiny_$kind.yaml --recipe $kind --target.config="$work/$target.json" \
      --draft.num_layers=5 --draft.block_size=16 --draft.num_anchors=256 \
      --data.seq_len=4096 --data.micro_batch_size=1
  done
done
