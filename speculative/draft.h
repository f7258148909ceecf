// The DFlash draft model (docs/semantics.md §7.3): `fc` and `hidden_norm` project the target's
// captured hidden states once, then Qwen3 decoder layers whose queries are the block slots and
// whose keys and values are [projected context | slots], and a final norm. The draft has no
// embedding and no LM head: it reads the target's, frozen. A Domino draft adds its correction
// head (a GRU over the block's tokens and a two-layer projection to the vocabulary); a JetSpec
// draft is the same backbone with in-block causal attention. Parameter names are the serving
// layout's (no `model.` prefix), and its config.json is the one vLLM and SGLang load
// (docs/semantics.md §7.5).
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "nn/layers.h"
#include "nn/qwen.h"
#include "nn/qwen_config.h"

namespace sprig::speculative {

// The target layers whose outputs feed a draft of `draft_layers` layers when none are given:
// [L / 2] for one draft layer, else 1 + i (L - 4) / (n - 1) for i in [0, n), rounded half to even
// (docs/semantics.md §7.2, E15).
std::vector<int64_t> default_target_layer_ids(int64_t target_layers, int64_t draft_layers);

// Domino's correction head (docs/semantics.md §9.4): `dflash_config.projector_type: domino`.
struct DominoHeadConfig {
  int64_t emb_dim = 256;              // E: the projection's width
  int64_t gru_hidden_dim = 1024;      // G: the GRU's state
  int64_t pure_draft_prefix_len = 1;  // p: leading slots left to the backbone alone
  bool shift_label = true;            // slot k predicts anchor + 1 + k (else anchor + k)

  // The first slot the head corrects: p with shift_label, 1 + p without.
  int64_t first_corrected_slot() const {
    return shift_label ? pure_draft_prefix_len : 1 + pure_draft_prefix_len;
  }
  bool operator==(const DominoHeadConfig&) const = default;
};

class DraftKind;  // speculative/draft_kind.h

struct DraftConfig {
  QwenConfig layers;  // the draft's Qwen3 layers: num_hidden_layers is the draft's depth
  int64_t block_size = 16;
  int64_t mask_token_id = -1;             // the token every non-anchor slot shows
  std::vector<int64_t> target_layer_ids;  // output of decoder layer i = HF hidden_states[i + 1]
  int64_t num_target_layers = 0;
  bool causal = false;  // in-block causal attention (JetSpec); DFlash blocks are bidirectional
  int64_t sliding_window = 0;              // 0: the draft's layers attend over all of the context
  std::optional<DominoHeadConfig> domino;  // Domino drafts only

  // Its kind (speculative/draft_kind.h), told by its config: a Domino head, in-block causal
  // attention (JetSpec), or neither (DFlash).
  const DraftKind& kind() const;
  int64_t context_width() const;  // fc's input: len(target_layer_ids) * hidden_size
  // Throws "[draft] ..." for a block size below 2 or above max_position_embeddings, a mask token
  // outside the vocabulary, target layer ids outside [0, num_target_layers), or a Domino head
  // without a corrected slot.
  void check() const;
  // The serving layout's config.json (architectures ["DFlashDraftModel"], dflash_config, ...),
  // stamping `dtype` as the weights' dtype.
  nlohmann::json to_json(DType dtype) const;
  // Reads that layout back; `label` (a path) prefixes errors.
  static DraftConfig from_json(const nlohmann::json& j, const std::string& label);
};

// The `draft:` section of a training config: the draft's shape relative to its target.
struct DraftOptions {
  int64_t num_layers = 5;
  int64_t block_size = 16;
  int64_t mask_token_id = -1;             // required
  std::vector<int64_t> target_layer_ids;  // empty: default_target_layer_ids
  int64_t num_attention_heads = 0, num_key_value_heads = 0, head_dim = 0;  // 0: the target's
  int64_t sliding_window = 0;
  bool causal = false;
  std::optional<DominoHeadConfig> domino;
};

// A draft config for `target`: its hidden size, vocabulary, MLP, norms and RoPE, with the draft's
// depth and optional attention shape.
DraftConfig draft_config_for(const QwenConfig& target, const DraftOptions& options);

class DFlashDraft : public Module {
 public:
  // HF-style random initialisation from `gen`, f32 on the CPU, after config.check() and
  // check_parameters_fit (nn/qwen.h).
  DFlashDraft(DraftConfig config, Generator& gen);
  const DraftConfig& config() const { return config_; }

  // The slots' final hidden states (B, Q, H) from their embeddings `noise` (B, Q, H), the target's
  // captured hidden states (B, S, L * H), the positions of [context | slots] (B, S + Q) and the
  // block mask [Q, S + Q].
  Var forward(const Var& noise, const Var& target_hidden, const Tensor& positions,
              const std::shared_ptr<const AttentionMask>& mask) const;
  // Decoding (docs/semantics.md §13), one sequence, no graph. extend_context projects the
  // target's hidden states (1, m, L * H) of newly committed tokens at `positions` (1, m) and
  // appends every layer's keys and values to `cache`, once per token. decode_block returns the
  // final hidden states (1, Q, H) of block slots with embeddings `noise` (1, Q, H) at `positions`
  // (1, Q): they attend to the whole cached context (within the sliding window) and to the block
  // (causally for an in-block causal draft); the cache is left as it was.
  void extend_context(const Tensor& target_hidden, const Tensor& positions, KVCache& cache) const;
  Var decode_block(const Var& noise, const Tensor& positions, KVCache& cache) const;
  // Domino's logit correction features: silu(embed_proj.0(concat(hidden, state))) (rows, E) of
  // slot states (rows, H) and GRU states (rows, G); the logits add them @ embed_proj.2^T.
  Var domino_features(const Var& hidden, const Var& state) const;

 private:
  DraftConfig config_;

 public:
  Linear& fc;
  RMSNorm& hidden_norm;
  std::vector<QwenDecoderLayer*> layers;
  RMSNorm* norm = nullptr;
  // Domino drafts only: `prefix_gru`, `embed_proj.0` (H + G -> E) and `embed_proj.2` (E -> V).
  GRU* prefix_gru = nullptr;
  Linear* embed_proj_in = nullptr;
  Linear* embed_proj_out = nullptr;
};

// Throws "[draft] <label> drafts for a target of ..." unless `draft` fits `target`: the same hidden
// size (the draft reads its embedding and head), vocabulary and number of layers.
void check_draft_fits(const DraftConfig& draft, const QwenConfig& target, const std::string& label);

// A draft directory: config.json in the serving layout and model.safetensors (single or sharded).
// load_draft_config reads and checks the config alone. load_draft loads the draft in f32 on the
// CPU: every expected tensor must be there with its shape, and a config.json whose dtype is not
// the weights' gets a warning.
DraftConfig load_draft_config(const std::string& dir);
std::unique_ptr<DFlashDraft> load_draft(const std::string& dir);
bool is_draft_dir(const std::string& dir);  // its config.json declares a DFlash draft

}  // namespace sprig::speculative
