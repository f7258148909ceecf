// `sprig train sft`: next-token SFT of QwenForCausalLM, a recipe of the generic trainer
// (train/trainer.h), on packed documents (pre-shifted labels, document-causal attention) or on
// folded shared-prefix rollouts (prefix-tree attention; docs/semantics.md describes both).
#pragma once

#include "train/config.h"
#include "train/trainer.h"

namespace sprig {

// Runs (or, with resume, continues) the training described by `config`. `on_step` (optional) is
// called after every optimizer step with the step number and the loss. `comm`: the data-parallel
// ranks of the run.
TrainSummary train_sft(const TrainConfig& config, bool resume, const StepCallback& on_step = {},
                       Communicator& comm = single_process());

}  // namespace sprig
