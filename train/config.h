// TrainConfig: a training run's YAML config with `--a.b=value` overrides. Every section and key
// is checked (an unknown key is an error naming the closest valid one), defaults are filled in,
// and the resolved YAML is what the run directory records. Example:
//   run_dir: runs/sft
//   seed: 0
//   device: auto                 # auto | cpu | cuda
//   model: {path: ckpt/}         # or {config: config.json} for a fresh random init
//   loss: {type: sft}            # sft | pg (LossConfig; sft recipe only)
//   data: {...}                  # data/config.h
//   train: {max_steps: 100, grad_accumulation_steps: 1, max_grad_norm: 1.0}
//   optimizer: {lr: 1e-4, betas: [0.9, 0.999], weight_decay: 0.0, eps: 1e-8}
//   scheduler: {warmup_ratio: 0.04, min_lr_ratio: 0.1}
//   log: {every_steps: 10}
//   attention: {backend: auto}   # auto | sprig | cudnn: the kernels attention runs on CUDA
//   checkpoint: {every_steps: 50, keep_last: 3}
//   val: {every_steps: 50}
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "attention/backend.h"
#include "data/config.h"
#include "speculative/draft.h"
#include "speculative/draft_kind.h"
#include "speculative/eagle3.h"
#include "train/optimizer.h"

namespace sprig {

// The sections of `sprig train dflash|domino|jetspec` (target: as TrainConfig::target_path):
//   draft: {mask_token_id: 151669, num_layers: 5, block_size: 16, num_anchors: 512,
//           loss_type: dflash, prefix_weight_base: 0.9, target_layer_ids: [...], init: draft_dir/,
//           vocab: draft_vocab.json,
//           # and the kind's own settings (DraftKind::train_settings), e.g.
//           # dflash, domino: loss_decay_gamma; domino: emb_dim, gru_hidden_dim,
//           #   pure_draft_prefix_len, shift_label, lambda_base_start, lambda_base_decay_ratio;
//           # jetspec: kd_temperature, kd_chunk_size}
struct DFlashConfig {
  std::string init;   // a draft directory to start from (empty: a fresh initialisation)
  std::string vocab;  // a draft vocabulary (sprig data draft-vocab), or "" for the target's
  speculative::DraftOptions draft;
  int64_t num_anchors = 512;
  // What the kind's objective reads, by name: loss_type, prefix_weight_base (the variable-prefix
  // loss's prefix-length weights) and the kind's own settings.
  speculative::DraftSettings settings;
};

// The draft: section of `sprig train eagle3` (docs/semantics.md §9.9):
//   draft: {aux_layer_ids: [1, 13, 24], ttt_steps: 7, vocab: draft_vocab.json, init: draft_dir/}
struct Eagle3TrainConfig {
  speculative::Eagle3Options draft;  // aux_layer_ids: empty for the default
  int64_t ttt_steps = 7;
  std::string vocab;  // a draft vocabulary (sprig data draft-vocab), or "" for the target's
  std::string init;   // an EAGLE-3 draft to start from (its aux layers and vocabulary hold)
};

// How the loss of an accumulation window is normalised: "mean" averages each micro-batch's mean
// loss (the reference's draft recipes); "tokens" divides the window's summed loss by its summed
// weight (every supervised token weighs the same, however the micro-batches are filled; the
// reference's SFT recipe).
enum class LossNormalization { mean, tokens };

// train.shard: what each data-parallel rank keeps of the optimizer's state and the gradients
// (docs/semantics.md §10.16). none: all of it; optimizer: the fp32 masters and AdamW moments of
// its 1/W of every gradient bucket (train/sharded_optimizer.h); gradients: those and its 1/W of
// the summed gradients (train/gradient_buckets.h).
enum class Sharding { none, optimizer, gradients };

// The `loss:` section of `sprig train sft` (docs/semantics.md §1.7):
//   loss: {type: sft, average: token, clip_eps: 0.0}
// sft: cross-entropy of every supervised token. pg: the policy-gradient loss -A * log p(token) of
// folded rollouts that carry advantages; each token weighs 1 (average: token) or 1 / the number of
// scored tokens of its completion (average: sequence, then the mean is over completions); with
// clip_eps > 0, PPO's clipped ratio against the records' old_logprobs.
enum class LossType { sft, pg };
enum class LossAverage { token, sequence };
struct LossConfig {
  LossType type = LossType::sft;
  LossAverage average = LossAverage::token;
  double clip_eps = 0.0;
};

struct TrainConfig {
  // The recipe: sft (neither set) reads `model:`; a draft kind of the DFlash family
  // (`sprig train <kind>`) and EAGLE-3 (`sprig train eagle3`) read `target:` and `draft:`.
  const speculative::DraftKind* draft_kind = nullptr;
  bool eagle3 = false;
  bool is_draft() const { return draft_kind != nullptr || eagle3; }
  std::string recipe_name() const;  // "sft", the draft kind's name or "eagle3", as checkpoints say
  std::string run_dir;
  uint64_t seed = 0;
  std::string device = "auto";
  std::string model_path, model_config;  // sft: exactly one is set
  // Compute dtype: auto (bf16 on CUDA, f32 on the CPU), bf16 or f32; the CPU always trains in f32.
  std::string model_dtype = "auto";
  // attention: {backend: auto}: the kernels attention runs on CUDA (attention/backend.h).
  AttentionBackend attention_backend = AttentionBackend::automatic;
  // target: of the draft recipes, exactly one of {path: ckpt/} (the frozen target, an HF or sprig
  // checkpoint) or {config: config.json} (a fresh one seeded by `seed`, for tests and demos).
  std::string target_path, target_config;
  DFlashConfig dflash;             // the DFlash family only
  Eagle3TrainConfig eagle3_draft;  // EAGLE-3 only
  LossConfig loss;                 // sft only
  data::DataConfig data;

  int64_t max_steps = 0;  // 0: num_epochs over the training data
  int64_t num_epochs = 1;
  int64_t grad_accumulation_steps = 1;
  double max_grad_norm = 1.0;                                        // 0: no clipping
  LossNormalization loss_normalization = LossNormalization::tokens;  // mean for the drafts
  int64_t max_consecutive_skips = 10;
  // train.activation_checkpointing: none (0), layers (1) or every_<n> (n): which of the trained
  // layers (an EAGLE-3 draft's steps) recompute their forward in the backward instead of keeping
  // their activations (nn/qwen.h checkpointed_layer).
  int64_t activation_checkpointing = 0;
  Sharding shard = Sharding::none;

  AdamWConfig optimizer;
  int64_t warmup_steps = -1;  // -1: from warmup_ratio
  double warmup_ratio = 0.0;
  double min_lr_ratio = 0.1;

  int64_t log_every_steps = 10;
  int64_t checkpoint_every_steps = 0;  // 0: only the final checkpoint
  int64_t keep_last = 3;
  int64_t val_every_steps = 0;  // 0: no validation during training (only at the end if val set)

  std::string resolved_yaml;  // the config after overrides and defaults, as the run records it
  // Settings given but not used, each a sentence (e.g. train.num_epochs beside train.max_steps);
  // the command prints them.
  std::vector<std::string> unused;
  // Not a config key: `sprig train --allow-config-change` lets a resume continue with settings that
  // differ from the checkpoint's (the trainer prints them).
  bool allow_config_change = false;
};

// `resolved_yaml` with one "a.b=value" override applied (what a run records when it runs
// otherwise than its config says, e.g. in f32 on the CPU).
std::string with_override(const std::string& resolved_yaml, const std::string& override_text);

// One setting that differs between two resolved configs; a missing key shows as "(absent)".
struct ConfigChange {
  std::string key, before, after;
  bool alters_run = true;  // false for where the run is, how long it runs and what it reports
};

// The settings of `after` that differ from `before`, by key (resolved YAML both). Those that do
// not alter the run: run_dir, train.max_steps, train.num_epochs (the schedule follows the new
// length), log.every_steps, val.every_steps, checkpoint.every_steps, checkpoint.keep_last,
// attention.backend (the same attention on other kernels).
std::vector<ConfigChange> config_changes(const std::string& before, const std::string& after);

// What load_train_config throws when the offending value came from an override: the command line
// is wrong (a usage error), not the file.
struct OverrideError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

// Loads `path`, applies overrides ("a.b=value", value parsed as YAML), validates everything for
// sft or, with `draft_kind`, that kind's recipe (whose defaults differ: the drafts train with betas
// (0.9, 0.95), lr 6e-4 and a warmup ratio of 0.05, as the reference's draft recipes). Throws
// std::invalid_argument with one sentence naming the key and where its value came from ("(in
// FILE)"), or OverrideError
// ("(from the command line: --a.b=value)").
TrainConfig load_train_config(const std::string& path, const std::vector<std::string>& overrides,
                              const speculative::DraftKind* draft_kind = nullptr);
// The same for `sprig train eagle3` (the draft recipes' defaults, with the reference's lr 1e-4).
TrainConfig load_eagle3_train_config(const std::string& path,
                                     const std::vector<std::string>& overrides);

}  // namespace sprig
