// The generic training loop every recipe runs on (docs/semantics.md, the training loop). The loop
// owns the run directory (a used one is refused unless resuming), mixed precision (fp32 masters
// with a bf16 compute copy on CUDA), the data loaders, exact resume, gradient accumulation with
// its normalisation, data-parallel ranks (gradient buckets summed over them), clipping, the
// non-finite guard, the learning-rate schedule, the checkpoint and validation cadence, and the
// progress line with metrics.jsonl (train/progress.h). A recipe supplies what differs between kinds
// of training: the module that trains, the loss and metrics of a micro-batch, the ratios it logs
// and validates, and what its checkpoints carry besides the weights.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "data/batch.h"
#include "data/config.h"
#include "data/loader.h"
#include "nn/module.h"
#include "train/communicator.h"
#include "train/config.h"
#include "train/memory.h"
#include "train/run_directory.h"

namespace sprig {

// Named sums a recipe reports per micro-batch (counts, weighted sums), added up over a logging
// window or a validation pass.
using MetricSums = std::map<std::string, double>;

// A logged ratio of two sums, e.g. accuracy = correct_tokens / valid_tokens: logged as `name`
// over each logging window (omitted when the denominator is 0) and as val_<name> after each
// validation pass (a denominator of 0 counts as 1).
struct RatioMetric {
  std::string name, numerator, denominator;
};

// The loss of one micro-batch.
struct MicroBatchLoss {
  Var sum;             // 0-dim, differentiable: the weighted sum of the per-item losses
  double weight = 0;   // the sum of the weights (supervised tokens for next-token losses)
  int64_t tokens = 0;  // supervised tokens (metrics.jsonl "tokens" counts them)
  double flops = 0;    // training FLOPs of the micro-batch, forward and backward (for MFU)
  MetricSums sums;     // what the recipe's ratios divide
};

class Recipe {
 public:
  virtual ~Recipe() = default;
  // The module whose parameters train, handed over in f32 on the CPU: the trainer keeps fp32
  // masters of its parameters and moves it to the run's device and compute dtype.
  virtual Module& trainable() = 0;
  // The data the trainer's loaders read.
  virtual const data::DataConfig& data() const = 0;
  // The loss of one micro-batch, or nothing to skip it (a skipped micro-batch does not count
  // towards the accumulation window). Called without a graph during validation.
  virtual std::optional<MicroBatchLoss> loss(const data::Batch& batch) = 0;
  // What a loss's mean divides its sum by, given its weight: max(weight, 1) for token counts.
  virtual double mean_denominator(double weight) const { return weight > 1.0 ? weight : 1.0; }
  virtual std::vector<RatioMetric> ratios() const { return {}; }
  // The shapes of a step's models and micro-batch, from which the trainer estimates the memory a
  // step needs before the first one (train/memory.h). The default counts the parameters alone.
  virtual StepShapes step_shapes() const { return {}; }
  // The config.json of checkpoints (the model they load as).
  virtual nlohmann::json checkpoint_config() const = 0;
  // Tensors a checkpoint's model.safetensors holds beside the trained weights, which are not
  // trained (a draft vocabulary's d2t and t2d); a resume rebuilds them from the config.
  virtual std::map<std::string, Tensor> checkpoint_buffers() const { return {}; }
  // The model directory whose tokenizer and generation files every checkpoint carries (the base
  // model; a draft's target), or "" for none.
  virtual std::string companion_files_dir() const { return ""; }
  // Saved in trainer_state.json under "recipe" (when not null) and handed back on resume, where
  // the recipe refuses a checkpoint made with different settings and restores its own state
  // (e.g. the generator of its random draws).
  virtual nlohmann::json checkpoint_metadata() const { return nullptr; }
  virtual void restore(const nlohmann::json& metadata) { (void)metadata; }
  // Called once the run directory exists, before the first step: a recipe writes there what
  // the run needs besides its checkpoints.
  virtual void begin_run(const std::string& run_dir) { (void)run_dir; }
  // Called before each validation pass (a recipe drawing random numbers starts them afresh, so
  // every pass sees the same draws and training's stream is not disturbed).
  virtual void begin_validation() {}
  // Called before each optimizer step's micro-batches and each validation pass with the optimizer
  // steps taken so far and the run's total (a curriculum follows them).
  virtual void begin_step(int64_t step, int64_t total_steps) {
    (void)step;
    (void)total_steps;
  }
};

// Where a run stands; saved in every checkpoint's trainer_state.json.
struct TrainerState {
  int64_t step = 0;     // optimizer steps taken
  int64_t updates = 0;  // AdamW updates made (steps minus the skipped ones: its bias correction)
  data::LoaderState loader;  // the next micro-batch
  uint64_t rng_seed = 0, rng_offset = 0;
  int64_t skipped_steps = 0;          // updates skipped for a non-finite loss or gradient
  int64_t skipped_micro_batches = 0;  // micro-batches the recipe had nothing to train on
  int64_t tokens = 0;                 // supervised tokens trained on so far
  // The logging window still open at `step` (steps since the last progress record, their summed
  // losses and the recipe's sums over every rank), so that a resumed run logs what the
  // uninterrupted one does.
  struct OpenWindow {
    int64_t steps = 0;
    double loss = 0;
    MetricSums sums;
  } window;
};

// What one run reports when it ends.
struct TrainSummary {
  int64_t steps = 0;
  double last_loss = 0;  // the last logged loss (its window's mean; 0 when nothing was trained)
  int64_t skipped_steps = 0;
  std::string run_dir;
  std::string checkpoint;  // the latest checkpoint's directory (a loadable model); "" for none
  // SIGINT or SIGTERM when one stopped the run at a step boundary (it saved a checkpoint there,
  // unless it had not trained a step yet); 0 when the run reached its end.
  int stopped_by_signal = 0;
};

// Called after every optimizer step with the step number and the loss (tests use it).
using StepCallback = std::function<void(int64_t step, double loss)>;

class Trainer {
 public:
  // Resolves the device and takes the run directory (train/run_directory.h): refused when it is
  // not empty and not sprig's, another run holds it, it already holds checkpoints and `resume` is
  // false, or it cannot be written; a missing one is created with its marker alone and removed if
  // the run fails before its first step. model.dtype (draft.dtype)
  // bf16 on the CPU, which computes in f32 there, becomes f32 in the config the run records
  // (said on stderr when the run directory is written).
  // `comm`: the data-parallel ranks of the run (train/communicator.h). Every rank runs the same
  // loop on its share of the data: gradients and counts are summed over the ranks, and rank 0
  // alone writes the run directory. A CUDA run's device is the rank's local rank.
  Trainer(TrainConfig config, bool resume, Communicator& comm = single_process());
  Device device() const { return device_; }
  // The config as the run records it: model_dtype is what it computes in (auto resolved).
  const TrainConfig& config() const { return config_; }

  // Trains `recipe` to the end of the schedule, or continues from the run's latest checkpoint.
  // Before the first step a step's memory is estimated and a run that cannot fit is refused
  // (train/memory.h). The run directory (config.resolved.yaml, metrics.jsonl, checkpoints/) is
  // written once this process has trained its first step: a run that fails before that leaves
  // the directory as it found it. While the loop runs, SIGINT or SIGTERM stops it at the next step
  // boundary with a checkpoint there (TrainSummary::stopped_by_signal); a second signal ends the
  // process at once.
  TrainSummary run(Recipe& recipe, const StepCallback& on_step = {});

 private:
  TrainConfig config_;
  bool resume_;
  Communicator& comm_;
  Device device_;
  std::string dtype_note_;  // printed with the run directory: the dtype the run records instead
  std::unique_ptr<RunDirectory> run_dir_;  // rank 0: the run directory, locked while this lives
};

}  // namespace sprig
