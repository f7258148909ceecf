// `sprig train sft`: next-token SFT of QwenForCausalLM on packed documents (pre-shifted labels,
// document-causal attention) or on folded shared-prefix rollouts (prefix-tree attention, SPEC
// §2.1), with AdamW, warmup + cosine, clipping, gradient accumulation, a non-finite guard,
// atomic checkpoints with exact resume, progress lines and metrics.jsonl.
#pragma once

#include <functional>
#include <string>

#include "data/batch.h"
#include "nn/qwen.h"
#include "train/config.h"

namespace sprig {

// The model input of a collated batch: positions from the batch, and per row the attention mask
// its layout needs (one causal square per document, or one prefix tree per rollout group with the
// trailing padding as its own causal block), compiled once for every layer.
QwenInput batch_input(const data::Batch& batch, const QwenConfig& config, Device device);

// What one run reports when it ends.
struct TrainSummary {
  int64_t steps = 0;
  double last_loss = 0;
  int64_t skipped_steps = 0;
  std::string run_dir;
  std::string checkpoint;  // the final checkpoint's directory (a loadable model)
};

// Runs (or, with resume, continues) the training described by `config`. `on_step` (optional) is
// called after every optimizer step with the step number and the loss (tests use it).
TrainSummary train_sft(const TrainConfig& config, bool resume,
                       const std::function<void(int64_t, double)>& on_step = {});

}  // namespace sprig
