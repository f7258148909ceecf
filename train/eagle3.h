// `sprig train eagle3`: an EAGLE-3 draft trained with the training-time test on a frozen target's
// states and distribution (docs/semantics.md §9.9), one recipe of the generic trainer
// (train/trainer.h). Rows come from the dflash packer (several documents per row, each isolated:
// its own positions, and no step reads past its document) or the padded one (one document per
// row). Each micro-batch's loss is already a mean (of the steps' means), so each weighs one.
#pragma once

#include "train/config.h"
#include "train/trainer.h"

namespace sprig {

// Runs (or, with resume, continues) the EAGLE-3 training `config` describes (config.eagle3).
// `on_step` (optional) is called after every optimizer step with the step number and the loss.
TrainSummary train_eagle3(const TrainConfig& config, bool resume, const StepCallback& on_step = {},
                          Communicator& comm = single_process());

}  // namespace sprig
