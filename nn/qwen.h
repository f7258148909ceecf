// Qwen2 / Qwen2.5 / Qwen3 dense decoder (HF transformers numerics, docs/semantics.md) on autograd
// Vars.
//
// Shape legend: B batch rows, T tokens per row, H hidden, nH / nKV query / key-value heads,
// D head dim, I intermediate, V vocab, L layers.
//
// The layers are reusable beyond the causal LM: attention takes its queries and its keys/values
// from separate inputs with separate positions, and a decoder layer can attend over an extra
// context placed before its own tokens (a speculative draft's block slots over the target's
// features). Layers copy the settings they need, so they never refer back to a config.
#pragma once

#include <memory>
#include <vector>

#include "attention/function.h"
#include "nn/layers.h"
#include "nn/qwen_config.h"
#include "nn/qwen_input.h"

namespace sprig {

// Keys and values of earlier tokens, per layer, for incremental decoding.
struct KVCache {
  std::vector<Tensor> k, v;  // per layer: (B, T_past, nKV, D)
  int64_t length() const { return k.empty() || !k[0].defined() ? 0 : k[0].size(1); }
  // Keeps the first `length` positions of every layer (speculative decoding rolls rejected tokens
  // back); throws "[kv cache] ..." when the cache holds fewer.
  void truncate(int64_t length);
  // Keeps the first `from` positions and, after them, the positions from + rows[i] in that order
  // (a tree's accepted path); throws "[kv cache] ..." for a row outside the cache.
  void keep(int64_t from, const std::vector<int64_t>& rows);
};

// The settings of one attention layer, copied from its model's config.
struct AttentionConfig {
  int64_t hidden_size = 0, num_heads = 0, num_kv_heads = 0, head_dim = 0;
  int64_t sliding_window = 0;  // 0: full attention
  RopeParameters rope;
  double rms_norm_eps = 1e-6;
  bool qkv_bias = false, o_bias = false, qk_norm = false;

  static AttentionConfig of_layer(const QwenConfig& config, int64_t layer);
};

class QwenAttention : public Module {
 public:
  QwenAttention(const QwenConfig& config, int64_t layer, Generator& gen);
  // A layer of settings `config` whose q/k/v projections read `input_size` features (an EAGLE-3
  // draft's layer reads [embedding | hidden], 2H), its weights drawn with `init_std`.
  QwenAttention(const AttentionConfig& config, int64_t input_size, int64_t layer, double init_std,
                Generator& gen);
  // Queries from xq (B, Tq, H) at positions q_pos (B, Tq); keys and values from xkv (B, Tk, H)
  // at kv_pos (B, Tk) (self-attention passes the same input twice) -> (B, Tq, H). `mask` is
  // [Tq, Tk]; with a cache, the new keys/values are appended to it and the mask covers
  // [cached | new] keys.
  Var forward(const Var& xq, const Tensor& q_pos, const Var& xkv, const Tensor& kv_pos,
              const std::shared_ptr<const AttentionMask>& mask, KVCache* cache = nullptr) const;
  // Appends the keys and values of xkv (B, Tk, H) at kv_pos (B, Tk) to `cache` without attending
  // (a draft's context rows in speculative decoding).
  void append_keys_values(const Var& xkv, const Tensor& kv_pos, KVCache& cache) const;
  // The two halves of a self-attention forward, for callers that keep keys across calls (EAGLE-3's
  // training-time test): the queries (B, T, nH, D), keys and values (B, T, nKV, D) of x at
  // `positions` (B, T), projected, q/k-normed (Qwen3) and rotated; and the attention of queries
  // over keys and values under `mask`, through o_proj -> (B, Tq, H).
  struct Projections {
    Var q, k, v;
  };
  Projections project(const Var& x, const Tensor& positions) const;
  Var attend(const Var& q, const Var& k, const Var& v,
             const std::shared_ptr<const AttentionMask>& mask) const;
  const AttentionConfig& config() const { return config_; }

  Linear &q_proj, &k_proj, &v_proj, &o_proj;
  RMSNorm *q_norm = nullptr, *k_norm = nullptr;  // Qwen3 only

 private:
  // The rotation of a forward over `positions`: rope_, or for a length-dependent type (dynamic)
  // the frequencies of the largest position.
  RopeFrequencies frequencies(const Tensor& positions) const;
  // Keys and values (B, Tk, nKV, D) of xkv: projected, k-normed (Qwen3) and rotated by `freqs`.
  std::pair<Var, Var> keys_values(const Var& xkv, const Tensor& kv_pos,
                                  const RopeFrequencies& freqs) const;
  // Appends k and v to this layer's entries of `cache`; returns the entries.
  std::pair<Tensor, Tensor> store(KVCache& cache, const Var& k, const Var& v) const;

  AttentionConfig config_;
  RopeFrequencies rope_;  // the frequencies of every forward within max_position_embeddings
  int64_t layer_;
};

// What one decoder layer attends with besides its hidden states x (B, Tq, H).
struct LayerInput {
  Tensor q_pos;                               // (B, Tq): positions of x's tokens
  Tensor kv_pos;                              // (B, S + Tq) with a context, else q_pos
  std::shared_ptr<const AttentionMask> mask;  // [Tq, S + Tq] (plus cached keys when decoding)
  // Optional (B, S, H): keys and values placed before x's own, used as given (no layer norm).
  Var context;
  KVCache* cache = nullptr;
};

// Whether activation checkpointing `every` (train.activation_checkpointing: 0 none, n every n-th
// layer from the first, 1 every layer) checkpoints decoder layer `layer` of a stack. Throws
// "[checkpointing] ..." for a negative `every`.
bool checkpointed_layer(int64_t every, int64_t layer);

class QwenDecoderLayer : public Module {
 public:
  QwenDecoderLayer(const QwenConfig& config, int64_t layer, Generator& gen);
  // Pre-norm residual block: x + attention(norm(x) over [context | norm(x)]), then x + MLP.
  Var forward(const Var& x, const LayerInput& in) const;
  // forward(x, in) as one activation-checkpointed segment (autograd/checkpoint.h): it keeps x and
  // the context for the backward, not its intermediates. `in` has no cache.
  Var forward_checkpointed(const Var& x, const LayerInput& in) const;

  // Declared (so registered) in transformers' order: named_parameters() lists names as HF does.
  QwenAttention& self_attn;
  QwenMLP& mlp;
  RMSNorm& input_layernorm;
  RMSNorm& post_attention_layernorm;
};

class QwenModel : public Module {
 public:
  QwenModel(const QwenConfig& config, Generator& gen);
  // Final-normed hidden states (B, T, H).
  Var forward(const QwenInput& in, KVCache* cache = nullptr) const;
  // The residual stream after each decoder layer listed in `layers` (HF hidden_states[i + 1],
  // before the final norm), in the list's order. Runs the layers up to the deepest one listed, or
  // every layer and the final norm when `final_hidden` is given (set to what forward() returns).
  // Throws "[qwen] layer id ... outside [0, L)".
  // With `cache`, every layer runs and appends the keys and values of in's tokens to it.
  std::vector<Var> layer_outputs(const QwenInput& in, const std::vector<int64_t>& layers,
                                 Var* final_hidden = nullptr, KVCache* cache = nullptr) const;
  // Activation checkpointing of the layers in training forwards (checkpointed_layer): 0 none.
  void set_activation_checkpointing(int64_t every);

  Embedding& embed_tokens;
  std::vector<QwenDecoderLayer*> layers;
  RMSNorm* norm = nullptr;

 private:
  Var run_layer(size_t layer, const Var& x, const QwenInput& in, KVCache* cache) const;

  int64_t checkpoint_every_ = 0;
};

// Throws std::runtime_error "[<who>] <n> parameters need <x> GiB in f32, more than the <y> GiB of
// memory available; the largest part is <part>" when `parts` cannot be allocated on the CPU:
// called before a model is built, so an absurd size in a config is named instead of ending in
// std::bad_alloc.
void check_parameters_fit(const std::vector<ParameterPart>& parts, const std::string& who);

class QwenForCausalLM : public Module {
 public:
  // Random HF-style initialisation from `gen` (fp32 on the CPU; use to() to move). Refuses a
  // config whose parameters do not fit in memory (check_parameters_fit).
  QwenForCausalLM(QwenConfig config, Generator& gen);

  const QwenConfig& config() const { return config_; }
  // The LM head matrix (V, H): lm_head.weight, or the embedding when tied.
  const Var& head_weight() const;

  Var hidden(const QwenInput& in, KVCache* cache = nullptr) const {
    return model.forward(in, cache);
  }
  Var logits(const Var& hidden) const;  // (..., H) -> (..., V)
  // Per-token loss (B*T) f32 of the final hidden states (B, T, H) against pre-shifted labels
  // (B, T) (ignore_index -100), in row chunks so no (B*T, V) logits tensor is ever held.
  Var token_losses(const Var& hidden, const Tensor& labels) const;
  // The loss (K) of K predictions: prediction k is made at row rows[k] of the flattened hidden
  // states (B*T, H), ascending, of token targets[k] (K) i64 (nn/loss.h linear_cross_entropy_at:
  // the head runs once per predicting row, never on the others).
  Var token_losses(const Var& hidden, const std::vector<int64_t>& rows, const Tensor& targets,
                   Tensor* entropy = nullptr) const;

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
