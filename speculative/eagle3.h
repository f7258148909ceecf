// The EAGLE-3 draft and its training-time test (docs/semantics.md §9.9). The draft reads the
// frozen target's residual stream after a few of its layers (low, middle, high), concatenated and
// projected by `fc`; one decoder layer combines that state with the next token's embedding (the
// target's, frozen: [embedding | state], 2H wide into its q/k/v projections), and a final norm and
// its own head give logits over the draft vocabulary (the target's, or a subset of it mapped back
// by draft_to_target). Training unrolls the draft for ttt_steps steps: step k reads its own states
// of step k - 1 and the token k further ahead, and attends to the step-0 keys causally and to its
// own position's keys of the steps before it (attention/mask.h ttt_mask). Parameter names are
// those the serving engines' LlamaForCausalLMEagle3 loaders read (`fc.weight`, `midlayer.*`,
// `norm.weight`, `lm_head.weight`, docs/semantics.md §9.9).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "nn/qwen.h"
#include "speculative/blocks.h"
#include "speculative/draft_vocab.h"
#include "speculative/target.h"

namespace sprig::speculative {

// The reference's default target layers [1, L/2 - 1, L - 4] (low, middle, high).
std::vector<int64_t> default_aux_layer_ids(int64_t target_layers);

struct Eagle3Config {
  // The draft's decoder layer: the target's hidden size, heads, MLP, RoPE and norms, one layer;
  // vocab_size is the target's.
  QwenConfig layer;
  int64_t draft_vocab_size = 0;        // the head's rows: vocab_size, or fewer
  std::vector<int64_t> aux_layer_ids;  // target decoder layers whose outputs fc reads
  int64_t num_target_layers = 0;

  int64_t aux_width() const {  // fc's input: len(aux_layer_ids) * hidden_size
    return static_cast<int64_t>(aux_layer_ids.size()) * layer.hidden_size;
  }
  // The serving layout's config.json (docs/semantics.md §9.9): LlamaForCausalLMEagle3 with one
  // layer, draft_vocab_size and target_hidden_size, the aux layers as SGLang reads them
  // (eagle_config.eagle_aux_hidden_state_layer_ids: the layers whose outputs fc reads) and as vLLM
  // does (top-level eagle_aux_hidden_state_layer_ids: the layers whose inputs those are, one more),
  // stamping `dtype` as the weights' dtype.
  nlohmann::json to_json(DType dtype) const;
  // Reads that layout back; `label` (a path) prefixes errors. num_target_layers is not in it: the
  // deepest aux layer + 1, until the draft meets its target.
  static Eagle3Config from_json(const nlohmann::json& j, const std::string& label);
  // The parameters' sizes, for the memory check before the draft is built.
  std::vector<ParameterPart> parameter_parts() const;
  // Throws "[eagle3] ..." for no aux layers, repeated ones or ones outside [0, num_target_layers),
  // or a draft vocabulary outside [1, vocab_size].
  void check() const;
};

// The `draft:` options of an EAGLE-3 draft for a target.
struct Eagle3Options {
  std::vector<int64_t> aux_layer_ids;  // empty: default_aux_layer_ids
  int64_t draft_vocab_size = 0;        // 0: the target's vocabulary
};

// The config of an EAGLE-3 draft for `target` (its layer shaped as the target's, without q/k norms
// or biases, as the engines build it); checked.
Eagle3Config eagle3_config_for(const QwenConfig& target, const Eagle3Options& options);

// The keys and values of the steps run so far, per step (B, S, nKV, D), kept in the graph.
struct TttKeys {
  std::vector<Var> k, v;
  int64_t steps() const { return static_cast<int64_t>(k.size()); }
};

class Eagle3Layer : public Module {
 public:
  Eagle3Layer(const QwenConfig& config, Generator& gen);
  // One step: the layer's output (B, S, H) from token embeddings `embeds` and states `hidden`
  // (B, S, H) at `positions` (B, S); appends this step's keys and values to `keys` and attends
  // over all of them under `mask` (ttt_mask of step keys.steps()). `checkpointed`: what follows
  // the projections (attention over the keys, o_proj, the MLP) is an activation-checkpointed
  // segment; the keys and values stay, the later steps read them.
  Var forward(const Var& embeds, const Var& hidden, const Tensor& positions, TttKeys& keys,
              const std::shared_ptr<const AttentionMask>& mask, bool checkpointed = false) const;
  // Decoding, one sequence, no graph: the outputs (1, m, H) of m new positions attending to the
  // keys in `cache` and causally to each other, their keys appended to it.
  Var decode(const Var& embeds, const Var& hidden, const Tensor& positions, KVCache& cache) const;
  // The same under `mask` [m, cached + m] (a tree of drafts: each sees its ancestors alone).
  Var decode(const Var& embeds, const Var& hidden, const Tensor& positions, KVCache& cache,
             Mask mask) const;

  RMSNorm& input_layernorm;  // of the embeddings
  RMSNorm& hidden_norm;      // of the states
  RMSNorm& post_attention_layernorm;
  QwenAttention& self_attn;
  QwenMLP& mlp;
};

class Eagle3Draft : public Module {
 public:
  // HF-style random initialisation from `gen`, f32 on the CPU, after config.check() and
  // check_parameters_fit (nn/qwen.h).
  Eagle3Draft(Eagle3Config config, Generator& gen);
  const Eagle3Config& config() const { return config_; }

  // The draft's vocabulary (speculative/draft_vocab.h): the target's whole one when the head
  // covers it; a smaller head's must be set.
  const DraftVocabulary& vocabulary() const { return vocabulary_; }
  // Throws "[eagle3] ..." for a vocabulary of another size than the head's or of another target.
  void set_vocabulary(DraftVocabulary vocabulary);

  // fc over the target's concatenated states (B, S, aux_width) -> (B, S, H).
  Var project(const Var& aux) const;
  // One step of the training-time test from token embeddings and states (B, S, H).
  Var step(const Var& embeds, const Var& hidden, const Tensor& positions, TttKeys& keys,
           const std::shared_ptr<const AttentionMask>& mask) const;
  // Activation checkpointing of the steps (nn/qwen.h checkpointed_layer over step indices; each
  // checkpointed as Eagle3Layer::forward says): 0 none.
  void set_activation_checkpointing(int64_t every);
  // Decoding (docs/semantics.md §13.4): the layer's outputs of new positions over `cache`
  // (Eagle3Layer::decode).
  Var decode(const Var& embeds, const Var& hidden, const Tensor& positions, KVCache& cache) const {
    return layer.decode(embeds, hidden, positions, cache);
  }
  Var decode(const Var& embeds, const Var& hidden, const Tensor& positions, KVCache& cache,
             Mask mask) const {
    return layer.decode(embeds, hidden, positions, cache, std::move(mask));
  }
  // Logits over the draft vocabulary (..., draft_vocab_size) of a step's states (..., H).
  Var logits(const Var& hidden) const { return lm_head.forward(norm.forward(hidden)); }

 private:
  Eagle3Config config_;
  DraftVocabulary vocabulary_;
  int64_t checkpoint_every_ = 0;

 public:
  Linear& fc;
  Eagle3Layer& layer;
  RMSNorm& norm;
  Linear& lm_head;
};

// Throws "[draft] <label> drafts for a target of ..." unless `draft` fits `target`: the same hidden
// size and vocabulary, and its aux layers among the target's.
void check_eagle3_fits(const Eagle3Config& draft, const QwenConfig& target,
                       const std::string& label);

// An EAGLE-3 draft directory: config.json in the serving layout and model.safetensors (single or
// sharded) with the engines' names, d2t and t2d for a reduced vocabulary (an embed_tokens.weight,
// which the engines may read, is ignored: the draft embeds with its target's). load_eagle3_draft
// loads it in f32 on the CPU.
bool is_eagle3_dir(const std::string& dir);  // its config.json declares an EAGLE-3 draft
Eagle3Config load_eagle3_config(const std::string& dir);
std::unique_ptr<Eagle3Draft> load_eagle3_draft(const std::string& dir);

struct Eagle3LossOptions {
  int64_t ttt_steps = 7;
  double step_decay = 0.8;  // step k weighs step_decay^k
  int64_t chunk_rows = 0;   // rows per chunk of the head's loss (0: automatic)
};

// The target's side of a micro-batch: its states after the draft's aux layers (B, S, aux_width),
// its logits (B, S, V) and its token embedding table (V, H), in the target's dtype on its device.
struct Eagle3Teacher {
  Tensor aux, logits, embedding;
};
Eagle3Teacher eagle3_teacher(const FrozenTarget& target, const Eagle3Draft& draft,
                             const DraftRows& rows);

// One micro-batch's loss and metrics (docs/semantics.md §9.9).
struct Eagle3Loss {
  Var loss;  // 0-dim: sum_k decay^k step_loss[k] / sum_k decay^k
  // Per step: the mean soft cross-entropy over the valid positions, its sum, how many positions
  // are valid and how many of them the draft's argmax gets right.
  std::vector<double> step_loss, step_loss_sum, step_valid, step_correct;
  // Simulated acceptance over the steps of each position with a valid step (+1 bonus), and the
  // number of such positions.
  double accept_len_sum = 0, valid_positions = 0;
  // The reference's chain counts per step k: positions whose drafts are right at every step up to
  // k, and those whose chain is valid that far (the document holds the tokens and they are
  // loss-masked in; a token outside the draft vocabulary breaks a chain but keeps it counted).
  std::vector<double> step_prefix_hits, step_prefix_valid;
  // Per position (B * S): how many of its steps are right before the first that is not (a step
  // not valid ends it): what decoding accepts from a chain drafted there.
  std::vector<int64_t> chain_lengths;
  double value() const { return loss.value().item(); }
  // The reference's simulated acceptance length: 1 + sum_k hits_k / max(valid_k, 1).
  double chain_accept_len() const;
};

// The training-time test of `draft` over `rows` against the target's `teacher`. With `logits`,
// every step's logits (ttt_steps * B * S, draft_vocab_size) f32 on the CPU, step-major. Throws
// NoValidAnchors when no position is valid at any step.
Eagle3Loss eagle3_loss(const Eagle3Draft& draft, const DraftRows& rows,
                       const Eagle3Teacher& teacher, const Eagle3LossOptions& options,
                       Tensor* logits = nullptr);

}  // namespace sprig::speculative
