// Training checkpoints: <run_dir>/checkpoints/step_<N>/ holding config.json (the model the
// checkpoint loads as), one <name>.safetensors per named tensor map (a trainer saves "model", the
// fp32 master weights under their parameter names, and "optimizer", the moments),
// trainer_state.json, config.resolved.yaml (the config the run had when it saved, which a
// resume compares with its own) and the base model's tokenizer and generation files. A checkpoint
// is written into a temporary directory, fsynced, renamed into place, and only then is the `latest`
// file switched to it (also by rename), so a run killed at any moment resumes from the last
// complete checkpoint. The newest `keep_last` are kept.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "tensor/tensor.h"

namespace sprig {

using TensorMap = std::map<std::string, Tensor>;

// What a checkpoint holds, and what loading one gives back.
struct CheckpointPayload {
  nlohmann::json config;                     // config.json
  std::map<std::string, TensorMap> tensors;  // <name>.safetensors
  nlohmann::json state;                      // trainer_state.json
  std::string resolved_config;  // config.resolved.yaml, the run's config ("": none; older ones)
  // A model directory whose companion files (nn/checkpoint.h: tokenizer, generation_config.json)
  // the checkpoint carries, so that its export is complete ("": none).
  std::string companions_from;
};

struct LoadedCheckpoint {
  std::string dir;
  CheckpointPayload payload;
};

// A path given for a model, a target or a draft, with a run followed to its newest checkpoint:
// a run directory, its checkpoints/ or checkpoints/latest stand for the step_<N> directory
// `latest` names (a bad `latest` throws std::runtime_error naming it). Any other path is
// returned as given.
std::string follow_latest(const std::string& path);

// <dir>/<name>.safetensors with `tensors`, and every tensor of one (a std::runtime_error
// "checkpoint DIR is corrupt: ..." when unreadable).
void save_tensor_file(const std::string& dir, const std::string& name, const TensorMap& tensors);
TensorMap load_tensor_file(const std::string& dir, const std::string& name);

class CheckpointManager {
 public:
  CheckpointManager(std::string run_dir, int64_t keep_last);

  // Writes step_<step> atomically, switches `latest`, then prunes old checkpoints. Returns the
  // checkpoint's directory. Only checkpoints sprig wrote (named step_<N>, holding a
  // trainer_state.json of step N) are replaced or pruned; anything else in checkpoints/ stays.
  std::string save(const CheckpointPayload& payload, int64_t step) const {
    stage(step);
    return commit(payload, step);
  }
  // save() in two halves, for checkpoints written by several ranks: stage() makes the temporary
  // directory of step_<step> (clearing what a killed run left) and returns it, every rank writes
  // files of its own there (save_tensor_file), then commit() adds the payload, fsyncs every file
  // and renames the directory into place.
  std::string stage(int64_t step) const;
  std::string commit(const CheckpointPayload& payload, int64_t step) const;
  // Throws std::runtime_error naming a directory of checkpoints/ that is named like a checkpoint
  // but was not written by sprig (a save of its step would have to replace it): checked before a
  // run trains.
  void check_checkpoints_are_sprigs() const;
  // The checkpoint `latest` names with the tensor files `names`, or nothing when there is none.
  // Throws std::runtime_error with one sentence when `latest` or the checkpoint it names is
  // unreadable or corrupt.
  std::optional<LoadedCheckpoint> load_latest(const std::vector<std::string>& names) const;
  bool has_checkpoint() const;  // whether `latest` exists
  std::string checkpoints_dir() const;

 private:
  std::string run_dir_;
  int64_t keep_last_;
};

}  // namespace sprig
