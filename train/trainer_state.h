// A run's state as its checkpoints keep it (docs/semantics.md §10.10): trainer_state.json written
// and read back with every field checked, and the checks a checkpoint's weights and optimizer
// state pass before a run resumes from them.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "autograd/var.h"
#include "train/checkpoint.h"
#include "train/trainer.h"

namespace sprig {

// trainer_state.json of `s`. `recipe_by_rank`: each rank's recipe metadata; rank 0's is
// "recipe", and a run of several ranks keeps them all under "recipe_by_rank". `recipe`: sprig
// train <recipe> saved it; `total_steps`: the schedule's length when it saved.
nlohmann::json trainer_state_json(const TrainerState& s, const std::string& recipe,
                                  int64_t total_steps,
                                  const std::vector<nlohmann::json>& recipe_by_rank);

// The recipe (sprig train <name>) that saved a trainer state: "recipe_name", else, in checkpoints
// from before it was kept, the draft recipes' metadata (DFlash's, before it named itself), else
// SFT's.
std::string recipe_that_saved(const nlohmann::json& state);

// A saved trainer state, every field checked: integers where counts are, none negative, the
// counts consistent with the step. Throws std::runtime_error naming the field and its value.
TrainerState read_trainer_state(const nlohmann::json& j);

// Refuses a checkpoint's master weights (`model`) and moments (`moments`, read from
// `moments_file`) unless each is the f32 tensor of the shape this run's has (`params`,
// `expected_moments`), finite, with no negative second moment (*.exp_avg_sq): a moment that is
// not would silently corrupt every later update. Throws std::runtime_error "[train] checkpoint
// DIR: FILE.safetensors: ...".
void check_optimizer_state(const std::string& dir, const TensorMap& model,
                           const std::vector<std::pair<std::string, Var>>& params,
                           const std::string& moments_file, const TensorMap& moments,
                           const TensorMap& expected_moments);

}  // namespace sprig
