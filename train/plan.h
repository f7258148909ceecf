// What a training step needs, from shapes alone: the shapes of each recipe's step (the recipes
// report theirs through these functions), and `sprig plan`: a config's estimate per rank, read
// from the models' config.json files (no weights), against a GPU's memory, itemised, with the
// smallest change that makes a run that does not fit fit (docs/semantics.md §10.12).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "data/config.h"
#include "speculative/draft.h"
#include "speculative/eagle3.h"
#include "train/config.h"
#include "train/memory.h"

namespace sprig {

// SFT's model over micro-batches of `data`.
StepShapes sft_step_shapes(const QwenConfig& model, const data::DataConfig& data);
// A DFlash-family draft over `num_anchors` blocks of each row of `data`, attending to the target's
// captured states of the row; its frozen target has `target_parameters`.
StepShapes draft_step_shapes(const speculative::DraftConfig& draft, int64_t target_parameters,
                             int64_t num_anchors, const data::DataConfig& data);
// An EAGLE-3 draft's layer over every position of `data`'s rows, `ttt_steps` times; the target
// keeps its states and logits.
StepShapes eagle3_step_shapes(const speculative::Eagle3Config& draft, int64_t target_parameters,
                              int64_t ttt_steps, const data::DataConfig& data);

// The step `config` trains, from its models' config.json files: shapes (with its micro-batch and
// activation checkpointing), trained parameters and compute dtype on a GPU.
struct PlannedStep {
  std::string what;  // "sft of a qwen3 model (28 layers, hidden 1024, vocabulary 151936)"
  data::DataConfig data;
  int64_t checkpoint_every = 0;                                   // train.activation_checkpointing
  std::function<StepShapes(const data::DataConfig&)> shapes_for;  // the recipe's, for other data
  int64_t trained_parameters = 0;
  DType compute = DType::bf16;
  Sharding shard = Sharding::none;  // train.shard
  int64_t grad_accumulation = 1;    // train.grad_accumulation_steps
  int64_t ranks = 1;                // data-parallel ranks (plan_report's gpus)
  StepShapes shapes() const;        // of `data`, `checkpoint_every` and the sharding over `ranks`
};
PlannedStep plan_step(const TrainConfig& config);

// A GPU's memory in bytes: h200 (143771 MiB), h100 (81559 MiB), a100-80 (81920 MiB) as
// nvidia-smi reports them, or a number of GiB ("40"). Throws std::invalid_argument "[plan] ..."
// for anything else.
double gpu_memory(const std::string& gpu);

// What `sprig plan` prints for `step` on `gpus` GPUs of `gpu` (gpu_memory): the estimate of one
// rank itemised, whether it fits, and when it does not, the smallest change that does
// (on several GPUs sharding the optimizer's state, then activation checkpointing every_2, then
// layers, then halving data.micro_batch_size, then data.seq_len), or that none does.
std::string plan_report(const PlannedStep& step, int64_t gpus, const std::string& gpu);

}  // namespace sprig
