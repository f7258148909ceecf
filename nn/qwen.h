// Qwen2 / Qwen2.5 / Qwen3 dense decoder (HF transformers numerics, SPEC §2.7) on autograd Vars.
//
// Shape legend: B batch rows, T tokens per row, H hidden, nH / nKV query / key-value heads,
// D head dim, I intermediate, V vocab, L layers.
//
// A batch row may hold one sequence, packed documents or folded rollouts: the row's layout lives
// entirely in its per-token position ids and its attention mask (compiled once per batch and
// shared by every layer).
#pragma once

#include <memory>
#include <vector>

#include "attention/function.h"
#include "nn/layers.h"
#include "nn/qwen_config.h"

namespace sprig {

// What one forward pass consumes.
struct QwenInput {
  Tensor input_ids;  // (B, T) i64
  Tensor position_ids;  // (B, T) i64, RoPE phase of each token
  std::shared_ptr<const AttentionMask> mask;  // full-attention layers
  std::shared_ptr<const AttentionMask> window_mask;  // sliding-window layers (when the config has)
};

// Builds the input of plain causal sequences: positions 0..T-1 in every row.
QwenInput causal_input(const Tensor& input_ids, const QwenConfig& config);

// Keys and values of earlier tokens, per layer, for incremental decoding.
struct KVCache {
  std::vector<Tensor> k, v;  // per layer: (B, T_past, nKV, D)
  int64_t length() const { return k.empty() || !k[0].defined() ? 0 : k[0].size(1); }
};

class QwenAttention : public Module {
 public:
  QwenAttention(const QwenConfig& config, int64_t layer, Generator& gen);
  // x (B, T, H) -> (B, T, H). With a cache, the new keys/values are appended to it and the mask
  // covers [cached | new] keys.
  Var forward(const Var& x, const QwenInput& in, KVCache* cache) const;

  Linear &q_proj, &k_proj, &v_proj, &o_proj;
  RMSNorm *q_norm = nullptr, *k_norm = nullptr;  // Qwen3 only

 private:
  const QwenConfig& config_;
  int64_t layer_;
};

class QwenDecoderLayer : public Module {
 public:
  QwenDecoderLayer(const QwenConfig& config, int64_t layer, Generator& gen);
  Var forward(const Var& x, const QwenInput& in, KVCache* cache) const;

  // Declared (so registered) in transformers' order: named_parameters() lists names as HF does.
  QwenAttention& self_attn;
  QwenMLP& mlp;
  RMSNorm& input_layernorm;
  RMSNorm& post_attention_layernorm;
};

class QwenModel : public Module {
 public:
  QwenModel(const QwenConfig& config, Generator& gen);
  // Final-normed hidden states (B, T, H). When `captured` is given, the residual stream after each
  // decoder layer listed in `capture_layers` is appended to it (HF hidden_states[i + 1]).
  Var forward(const QwenInput& in, KVCache* cache = nullptr,
              const std::vector<int64_t>& capture_layers = {},
              std::vector<Var>* captured = nullptr) const;

  Embedding& embed_tokens;
  std::vector<QwenDecoderLayer*> layers;
  RMSNorm* norm = nullptr;
};

class QwenForCausalLM : public Module {
 public:
  // Random HF-style initialisation from `gen` (fp32 on the CPU; use to() to move).
  QwenForCausalLM(QwenConfig config, Generator& gen);

  const QwenConfig& config() const { return config_; }
  // The LM head matrix (V, H): lm_head.weight, or the embedding when tied.
  const Var& head_weight() const;

  Var hidden(const QwenInput& in, KVCache* cache = nullptr) const { return model.forward(in, cache); }
  Var logits(const Var& hidden) const;  // (..., H) -> (..., V)
  // Per-token loss (B*T) f32 of the final hidden states (B, T, H) against pre-shifted labels
  // (B, T) (ignore_index -100), in row chunks so no (B*T, V) logits tensor is ever held.
  Var token_losses(const Var& hidden, const Tensor& labels) const;

 private:
  QwenConfig config_;

 public:
  QwenModel& model;
  Linear* lm_head = nullptr;  // null when tied
};

// Labels for ordinary next-token training of one row per sequence: labels[t] = ids[t + 1],
// the last position -100.
Tensor shift_labels(const Tensor& input_ids);

}  // namespace sprig
