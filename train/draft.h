// `sprig train dflash|domino|jetspec`: a draft of the DFlash family trained on a frozen target's
// hidden states, one recipe of the generic trainer (train/trainer.h) for the three objectives.
// Rows come from the dflash packer (several documents per row, each isolated: its own positions,
// context and anchors inside it) or the padded one (one document per row); anchors and variable
// prefixes are drawn from the run's seeded generator, whose state every checkpoint keeps
// (docs/semantics.md §8-§10).
#pragma once

#include "train/config.h"
#include "train/trainer.h"

namespace sprig {

// Runs (or, with resume, continues) the draft training `config` describes (config.recipe is
// dflash, domino or jetspec). `on_step` (optional) is called after every optimizer step with the
// step number and the loss. `comm`: the data-parallel ranks (each draws its anchors from the
// generator seeded with seed + rank).
TrainSummary train_draft(const TrainConfig& config, bool resume, const StepCallback& on_step = {},
                         Communicator& comm = single_process());

}  // namespace sprig
