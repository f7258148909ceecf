// `sprig plan`'s parts (train/plan.h): each recipe's step planned from its config.json files has
// the shapes and parameters the recipe itself reports, the estimate is within 10% of the peak a
// run of every recipe measures, GPUs are named or sized, and a step that does not fit gets the
// smallest change whose estimate fits. (Sharded runs on two ranks:
// DataParallel.ShardingTrainsAsTheWholeStateOnTwoRanks.)
#include "train/plan.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "speculative/draft.h"
#include "speculative/draft_kind.h"
#include "speculative/eagle3.h"
#include "tests/train/train_test_util.h"
#include "train/draft.h"
#include "train/eagle3.h"
#include "train/sft.h"

namespace sprig {
namespace {

using testing::contains;
using testing::TempDir;

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

QwenConfig tiny_qwen3() {
  return QwenConfig::load(testing::source_path("train/configs/tiny_qwen3.json"));
}

TEST(Plan, AnSftStepIsTheModelsOverItsMicroBatch) {
  TempDir dir;
  const PlannedStep p =
      plan_step(testing::tiny_config(dir, {"train.activation_checkpointing=layers"}));
  Generator gen(0);
  EXPECT_EQ(p.trained_parameters, QwenForCausalLM(tiny_qwen3(), gen).num_parameters());
  EXPECT_EQ(p.compute, DType::bf16);
  const StepShapes s = p.shapes();
  EXPECT_EQ(s.tokens, 2 * 64);
  EXPECT_EQ(s.batch_tokens, 2 * 64);
  EXPECT_EQ(s.checkpoint_every, 1);
  EXPECT_EQ(s.layers.num_hidden_layers, 2);
  EXPECT_EQ(s.frozen_parameters, 0);
  EXPECT_TRUE(contains(p.what, "sft of a qwen3 model (2 layers, hidden 64, vocabulary 64)"));
}

TEST(Plan, ADraftStepCountsItsTargetAsFrozenAndItsCapturedStates) {
  TempDir dir;
  const TrainConfig c = testing::tiny_dflash_config(dir);
  const PlannedStep p = plan_step(c);
  const QwenConfig target = tiny_qwen3();
  Generator gen(0);
  const speculative::DraftConfig draft = speculative::draft_config_for(target, c.dflash.draft);
  EXPECT_EQ(p.trained_parameters, speculative::DFlashDraft(draft, gen).num_parameters());
  const StepShapes s = p.shapes();
  EXPECT_EQ(s.frozen_parameters, QwenForCausalLM(target, gen).num_parameters());
  EXPECT_EQ(s.tokens, c.data.micro_batch_size * c.dflash.num_anchors * draft.block_size);
  EXPECT_EQ(s.context_tokens, c.data.micro_batch_size * c.data.seq_len);
  EXPECT_EQ(s.kept_elements, s.context_tokens * draft.context_width());

  TempDir e3;
  const TrainConfig ce = testing::tiny_eagle3_config(e3);
  const PlannedStep pe = plan_step(ce);
  const speculative::Eagle3Config e = speculative::eagle3_config_for(target, ce.eagle3_draft.draft);
  EXPECT_EQ(pe.trained_parameters, speculative::Eagle3Draft(e, gen).num_parameters());
  EXPECT_EQ(pe.shapes().tokens, ce.data.micro_batch_size * ce.data.seq_len);
  EXPECT_EQ(pe.shapes().layers.num_hidden_layers, 3);  // its layer once per ttt step
}

// Every recipe's tiny run, with and without activation checkpointing: the plan of its config (f32,
// as the CPU computes) is within 10% of the peak its run measures (the allocator's high-water
// mark over its steps). docs/semantics.md §10.12 holds the figures.
TEST(Plan, TheEstimateIsWithinTenPercentOfTheMeasuredPeak) {
  for (const char* recipe : {"sft", "dflash", "domino", "jetspec", "eagle3"})
    for (const char* checkpointing : {"none", "layers"}) {
      SCOPED_TRACE(std::string(recipe) + " " + checkpointing);
      TempDir dir;
      const std::vector<std::string> overrides = {
          "train.max_steps=2", "log.every_steps=1",
          std::string("train.activation_checkpointing=") + checkpointing};
      const std::string name = recipe;
      TrainConfig c;
      if (name == "sft") {
        c = testing::tiny_config(dir, overrides);
        train_sft(c, false);
      } else if (name == "eagle3") {
        c = testing::tiny_eagle3_config(dir, overrides);
        train_eagle3(c, false);
      } else {
        c = testing::tiny_dflash_config(dir, overrides, speculative::find_draft_kind(name));
        train_draft(c, false);
      }
      PlannedStep step = plan_step(c);
      step.compute = DType::f32;
      const double estimate =
          estimate_step_memory(step.shapes(), step.trained_parameters, step.compute).total();
      const double peak = testing::peak_memory_of(c.run_dir);
      std::cout << recipe << " " << checkpointing << ": estimate " << estimate << " bytes, peak "
                << peak << " (" << estimate / peak << ")\n";
      EXPECT_NEAR(estimate / peak, 1.0, 0.1);
    }
}

TEST(Plan, GpusByNameOrGiB) {
  EXPECT_EQ(gpu_memory("h200"), 143771.0 * 1024 * 1024);
  EXPECT_EQ(gpu_memory("h100"), 81559.0 * 1024 * 1024);
  EXPECT_EQ(gpu_memory("a100-80"), 80 * kGiB);
  EXPECT_EQ(gpu_memory("40"), 40 * kGiB);
  EXPECT_EQ(gpu_memory("0.5"), 0.5 * kGiB);
  for (const char* bad : {"h300", "", "0", "-3", "40GiB", "nan", "inf"})
    EXPECT_THROW(gpu_memory(bad), std::invalid_argument) << bad;
}

// On a GPU of exactly a given step's estimate, that step fits and a larger one gets the change
// that brings it under: checkpointing first, then the micro-batch, then the rows.
TEST(Plan, AStepThatDoesNotFitGetsTheSmallestChangeThatDoes) {
  TempDir dir;
  PlannedStep p = plan_step(testing::tiny_config(dir, {"data.seq_len=4096"}));
  const auto total = [](const PlannedStep& q) {
    return estimate_step_memory(q.shapes(), q.trained_parameters, q.compute).total();
  };
  const auto gib_text = [](double bytes) { return std::to_string(bytes / kGiB); };
  EXPECT_TRUE(contains(plan_report(p, 1, gib_text(total(p) * 1.01)), ": fits (99%)"));

  // Two layers: every_2 checkpoints layer 0, whose rebuild holds no more than layer 1 keeps, the
  // least; layers keeps both inputs and is no smaller.
  PlannedStep every_2 = p, layers = p;
  every_2.checkpoint_every = 2;
  layers.checkpoint_every = 1;
  EXPECT_LT(total(every_2), total(p));
  EXPECT_GT(total(layers), total(every_2));
  std::string report = plan_report(p, 1, gib_text(total(every_2) * 1.0001));
  EXPECT_TRUE(contains(report, "does not fit")) << report;
  EXPECT_TRUE(contains(report,
                       "the smallest change that fits: "
                       "--train.activation_checkpointing=every_2\n"))
      << report;
  // On several GPUs sharding is tried first, and the sharding that saves the most is kept while
  // checkpointing is tried (gradients here: the bucket in flight is smaller than the activations).
  report = plan_report(p, 8, gib_text(total(every_2) * 1.0001));
  EXPECT_TRUE(contains(report, "data parallel: each of the 8 ranks holds all of this")) << report;
  EXPECT_TRUE(contains(report,
                       "the smallest change that fits: --train.shard=gradients "
                       "--train.activation_checkpointing=every_2\n"))
      << report;

  PlannedStep smaller = layers;
  smaller.data.micro_batch_size = 1;
  report = plan_report(p, 1, gib_text(total(smaller) * 1.0001));
  EXPECT_TRUE(contains(report,
                       "the smallest change that fits: "
                       "--train.activation_checkpointing=layers --data.micro_batch_size=1\n"))
      << report;

  // A step that checkpoints every layer already goes straight to its micro-batch.
  report = plan_report(layers, 1, gib_text(total(smaller) * 1.0001));
  EXPECT_TRUE(contains(report, "the smallest change that fits: --data.micro_batch_size=1\n"))
      << report;

  report = plan_report(p, 1, "0.000001");
  EXPECT_TRUE(contains(report,
                       "no activation checkpointing, micro-batch or row length fits: "
                       "the weights, gradients and AdamW state alone take "))
      << report;
}

// train.shard: optimizer divides the moments (and bf16's masters) by the ranks, nothing else.
TEST(Plan, ShardingDividesTheOptimizerStateByTheRanks) {
  TempDir dir;
  const PlannedStep whole = plan_step(testing::tiny_config(dir));
  PlannedStep sharded = plan_step(testing::tiny_config(dir, {"train.shard=optimizer"}));
  sharded.ranks = 4;
  const int64_t n = whole.trained_parameters;
  const double P = static_cast<double>(n);
  const MemoryEstimate a = estimate_step_memory(whole.shapes(), n, DType::bf16),
                       b = estimate_step_memory(sharded.shapes(), n, DType::bf16),
                       f32 = estimate_step_memory(sharded.shapes(), n, DType::f32);
  EXPECT_EQ(b.moments, 2 * P);    // 8 bytes / 4 ranks
  EXPECT_EQ(b.masters, P);        // 4 bytes / 4 ranks
  EXPECT_EQ(f32.masters, 4 * P);  // f32 parameters are their own masters, whole on every rank
  EXPECT_EQ(b.gradients, a.gradients);
  EXPECT_EQ(b.activations, a.activations);

  const std::string report = plan_report(sharded, 4, "80");
  EXPECT_TRUE(contains(report, "AdamW moments")) << report;
  EXPECT_TRUE(contains(report, "this rank's shard")) << report;
  EXPECT_TRUE(contains(report,
                       "data parallel, train.shard optimizer: each of the 4 ranks holds the "
                       "weights and gradients whole and 1/4 of the AdamW state"))
      << report;
  // Where sharding alone is enough, it is the change.
  const double sharded_total = estimate_step_memory(
                                   [&] {
                                     PlannedStep q = whole;
                                     q.shard = Sharding::optimizer;
                                     q.ranks = 8;
                                     return q.shapes();
                                   }(),
                                   n, whole.compute)
                                   .total();
  const std::string change = plan_report(whole, 8, std::to_string(sharded_total * 1.0001 / kGiB));
  EXPECT_TRUE(contains(change, "the smallest change that fits: --train.shard=optimizer\n"))
      << change;
}

}  // namespace
}  // namespace sprig
