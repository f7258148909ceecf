// `sprig train dflash|domino|jetspec`: a draft of the DFlash family trained on a frozen target's
// hidden states, one recipe of the generic trainer (train/trainer.h) for the three objectives.
// Rows come from the dflash packer (several documents per row, each isolated: its own positions,
// context and anchors inside it) or the padded one (one document per row); anchors and variable
// prefixes are drawn from the run's seeded generator, whose state every checkpoint keeps
// (docs/semantics.md §8-§10).
#pragma once

#include <string>

#include "speculative/target.h"
#include "train/config.h"
#include "train/trainer.h"

namespace sprig {

// The frozen target of a draft recipe (target: of its config), in the run's compute dtype, and
// the directory checkpoints name as it: target.path, or for a fresh target (target.config) its
// copy in the run directory, saved once so that the run's drafts can be evaluated and exported
// against it.
class DraftTarget {
 public:
  DraftTarget(const TrainConfig& config, Device device);
  const speculative::FrozenTarget& frozen() const { return target_; }
  const QwenConfig& config() const { return target_.config(); }
  const std::string& dir() const { return dir_; }  // "" for a fresh one until begin_run
  void begin_run(const std::string& run_dir);
  // `data` checked against the target's vocabulary (data.vocab_size above it is refused) and set
  // to it, so every token id is checked.
  data::DataConfig fitted(data::DataConfig data) const;

 private:
  speculative::FrozenTarget target_;
  bool fresh_;
  std::string dir_;
};

// Runs (or, with resume, continues) the draft training `config` describes (config.recipe is
// dflash, domino or jetspec). `on_step` (optional) is called after every optimizer step with the
// step number and the loss. `comm`: the data-parallel ranks (each draws its anchors from the
// generator seeded with seed + rank).
TrainSummary train_draft(const TrainConfig& config, bool resume, const StepCallback& on_step = {},
                         Communicator& comm = single_process());

}  // namespace sprig
