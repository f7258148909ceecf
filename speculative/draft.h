// The DFlash draft model (docs/semantics.md §7.3): `fc` and `hidden_norm` project the target's
// captured hidden states once, then Qwen3 decoder layers whose queries are the block slots and
// whose keys and values are [projected context | slots], and a final norm. The draft has no
// embedding and no LM head: it reads the target's, frozen. A kind may add a head (Domino's
// correction head, speculative/domino.h), which the backbone builds and names but never reads; a
// JetSpec draft is the same backbone with in-block causal attention. Parameter names are the
// serving layout's (no `model.` prefix), and its config.json is the one vLLM and SGLang load
// (docs/semantics.md §7.5).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "nn/layers.h"
#include "nn/qwen.h"
#include "nn/qwen_config.h"
#include "speculative/draft_vocab.h"

namespace sprig::speculative {

// The target layers whose outputs feed a draft of `draft_layers` layers when none are given:
// [L / 2] for one draft layer, else 1 + i (L - 4) / (n - 1) for i in [0, n), rounded half to even
// (docs/semantics.md §7.2, E15).
std::vector<int64_t> default_target_layer_ids(int64_t target_layers, int64_t draft_layers);

class DraftKind;  // speculative/draft_kind.h
struct DraftConfig;

// Reads the keys of a draft's config.json `j`, refusing a missing or mistyped one with
// std::runtime_error "<label>: ..." (label: its path).
class DraftJsonReader {
 public:
  DraftJsonReader(const nlohmann::json& j, std::string label);
  [[noreturn]] void fail(const std::string& message) const;
  const nlohmann::json& nested() const { return j_["dflash_config"]; }  // there once checked
  int64_t integer(const char* key) const;                               // a top-level key
  int64_t nested_integer(const char* key) const;                        // dflash_config.<key>
  // dflash_config.<key>, else the top-level one; where both are there they must agree (an engine
  // reading the other one would serve another draft).
  int64_t nested_or_top(const char* key) const;
  // A flag of dflash_config (nested) or of the top level: none when absent or null.
  std::optional<bool> flag(const char* key, bool nested) const;

 private:
  const nlohmann::json& j_;
  std::string label_;
};

// A head a draft kind adds to the backbone (Domino's correction head), defined in the kind's own
// file: its check against the draft, its keys of config.json, the memory its parameters take
// and its modules. The backbone knows only that it is there. Immutable: draft configs share it.
class DraftHead {
 public:
  virtual ~DraftHead() = default;
  virtual const DraftKind& kind() const = 0;
  // Throws std::invalid_argument "[draft] ..." unless the head fits `draft`.
  virtual void check(const DraftConfig& draft) const = 0;
  // Writes its keys into config.json `j` (under dflash_config, and any the engines read at the
  // top level).
  virtual void write(nlohmann::json& j) const = 0;
  virtual std::vector<ParameterPart> parameter_parts(const DraftConfig& draft) const = 0;
  // Its modules, randomly initialised from `gen`; the draft names their parameters as they are
  // named here (the serving layout's names).
  virtual std::unique_ptr<Module> build(const DraftConfig& draft, Generator& gen) const = 0;
};

struct DraftConfig {
  QwenConfig layers;  // the draft's Qwen3 layers: num_hidden_layers is the draft's depth
  int64_t block_size = 16;
  int64_t mask_token_id = -1;             // the token every non-anchor slot shows
  std::vector<int64_t> target_layer_ids;  // output of decoder layer i = HF hidden_states[i + 1]
  int64_t num_target_layers = 0;
  bool causal = false;  // in-block causal attention (JetSpec); DFlash blocks are bidirectional
  int64_t sliding_window = 0;             // 0: the draft's layers attend over all of the context
  std::shared_ptr<const DraftHead> head;  // a kind's head (Domino's), or none
  // The ids its logits cover (docs/semantics.md §9.10): 0 for the target's whole vocabulary, else
  // the size of a draft vocabulary, whose rows of the target's head the draft carries.
  int64_t draft_vocab_size = 0;

  int64_t vocab_rows() const { return draft_vocab_size > 0 ? draft_vocab_size : layers.vocab_size; }
  bool reduced_vocab() const { return vocab_rows() < layers.vocab_size; }
  // Its kind (speculative/draft_kind.h), told by its config: its head's, in-block causal
  // attention (JetSpec), or neither (DFlash).
  const DraftKind& kind() const;
  int64_t context_width() const;  // fc's input: len(target_layer_ids) * hidden_size
  // Throws "[draft] ..." for a block size below 2 or above max_position_embeddings, a mask token
  // outside the vocabulary, target layer ids outside [0, num_target_layers), a draft vocabulary
  // larger than the target's, or a head that does not fit (DraftHead::check).
  void check() const;
  // The serving layout's config.json (architectures ["DFlashDraftModel"], dflash_config, ...,
  // draft_vocab_size when reduced), stamping `dtype` as the weights' dtype.
  nlohmann::json to_json(DType dtype) const;
  // Reads that layout back; `label` (a path) prefixes errors.
  static DraftConfig from_json(const nlohmann::json& j, const std::string& label);
  // The draft's parameters by part (its layers, fc, its head's, a reduced vocabulary's rows of the
  // target's head), named for check_parameters_fit (nn/qwen.h).
  std::vector<ParameterPart> parameter_parts() const;
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
  std::shared_ptr<const DraftHead> head;  // set by the kind (DraftKind::shape)
  int64_t draft_vocab_size = 0;           // 0: the target's whole vocabulary
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
  // Activation checkpointing of forward's layers (nn/qwen.h checkpointed_layer): 0 none.
  void set_activation_checkpointing(int64_t every);
  // Decoding (docs/semantics.md §13), one sequence, no graph. extend_context projects the
  // target's hidden states (1, m, L * H) of newly committed tokens at `positions` (1, m) and
  // appends every layer's keys and values to `cache`, once per token. decode_block returns the
  // final hidden states (1, Q, H) of block slots with embeddings `noise` (1, Q, H) at `positions`
  // (1, Q): they attend to the whole cached context (within the sliding window) and to the block
  // (causally for an in-block causal draft); the cache is left as it was.
  void extend_context(const Tensor& target_hidden, const Tensor& positions, KVCache& cache) const;
  Var decode_block(const Var& noise, const Tensor& positions, KVCache& cache) const;
  // The modules of the config's head (its kind reads them), or nullptr.
  const Module* head() const { return head_; }
  // Module::to, and the draft vocabulary's rows of the LM head with the parameters.
  using Module::to;
  void to(Device device, DType dtype);

  // The draft's vocabulary (speculative/draft_vocab.h): the target's whole one, or a reduced one
  // that set_vocabulary gives with its rows of the target's LM head (draft_vocab_size, H), frozen
  // (lm_head(), undefined for the whole vocabulary: the draft reads the target's head).
  // A reduced one not yet given is a std::logic_error.
  const DraftVocabulary& vocabulary() const;
  const Tensor& lm_head() const { return lm_head_; }
  // Throws "[draft] ..." for a vocabulary or rows of another size than draft_vocab_size or of
  // another target.
  void set_vocabulary(DraftVocabulary vocabulary, Tensor lm_head);
  // What a checkpoint and an export hold beside the weights: lm_head.weight, d2t and t2d of a
  // reduced vocabulary (nothing for the whole one).
  std::map<std::string, Tensor> vocabulary_tensors() const;

 private:
  DraftConfig config_;
  int64_t checkpoint_every_ = 0;
  const Module* head_ = nullptr;
  DraftVocabulary vocabulary_;
  Tensor lm_head_;

 public:
  Linear& fc;
  RMSNorm& hidden_norm;
  std::vector<QwenDecoderLayer*> layers;
  RMSNorm* norm = nullptr;
};

// Throws "[draft] <label> drafts for a target of ..." unless `draft` fits `target`: the same hidden
// size (the draft reads its embedding and head), vocabulary and number of layers.
void check_draft_fits(const DraftConfig& draft, const QwenConfig& target, const std::string& label);

// A draft directory: config.json in the serving layout and model.safetensors (single or sharded),
// with lm_head.weight, d2t and t2d for a reduced vocabulary. load_draft_config reads and checks
// the config alone. load_draft loads the draft in f32 on the CPU: every expected tensor must be
// there with its shape, and a config.json whose dtype is not the weights' gets a warning.
DraftConfig load_draft_config(const std::string& dir);
std::unique_ptr<DFlashDraft> load_draft(const std::string& dir);
bool is_draft_dir(const std::string& dir);  // its config.json declares a DFlash draft

}  // namespace sprig::speculative
