// Training checkpoints (DESIGN §5): <run_dir>/checkpoints/step_<N>/ holding config.json and
// model.safetensors (the fp32 master weights under HF names: a loadable model), optimizer.safetensors
// (moments) and trainer_state.json (step, epoch, data loader position, RNG, counters). Each is
// written into a temporary directory, fsynced, renamed into place, and only then is the
// `latest` file switched to it (also by rename), so a run killed at any moment resumes from the
// last complete checkpoint. The newest `keep_last` checkpoints are kept.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "data/loader.h"
#include "nn/qwen_config.h"
#include "tensor/tensor.h"

namespace sprig {

struct TrainerState {
  int64_t step = 0;  // optimizer steps taken
  data::LoaderState loader;  // the next micro-batch
  uint64_t rng_seed = 0, rng_offset = 0;
  int64_t skipped_steps = 0;  // updates skipped for a non-finite loss or gradient
  int64_t tokens = 0;  // supervised tokens trained on so far
};

struct LoadedCheckpoint {
  std::string dir;
  std::map<std::string, Tensor> model;  // fp32 masters by HF name
  std::map<std::string, Tensor> optimizer;
  TrainerState state;
};

class CheckpointManager {
 public:
  CheckpointManager(std::string run_dir, int64_t keep_last);

  // Writes step_<state.step> atomically, switches `latest`, then prunes old checkpoints. Returns
  // the checkpoint's directory.
  std::string save(const QwenConfig& config, const std::map<std::string, Tensor>& model,
            const std::map<std::string, Tensor>& optimizer, const TrainerState& state) const;
  // The checkpoint `latest` names, or nothing when there is none. Throws std::runtime_error with
  // one sentence when `latest` or the checkpoint it names is unreadable or corrupt.
  std::optional<LoadedCheckpoint> load_latest() const;
  bool has_checkpoint() const;  // whether `latest` exists
  std::string checkpoints_dir() const;

 private:
  std::string run_dir_;
  int64_t keep_last_;
};

}  // namespace sprig
