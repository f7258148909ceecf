// train.activation_checkpointing: a run with each setting equals the run without, bit for bit
// (weights, optimizer state, every logged figure but the peak), for SFT's layers, a DFlash draft's
// layers and an EAGLE-3 draft's steps; the setting's values and refusals, and a resume may change
// it.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "tests/train/train_test_util.h"
#include "train/draft.h"
#include "train/eagle3.h"
#include "train/sft.h"

namespace sprig {
namespace {

using testing::contains;
using testing::TempDir;

struct Run {
  std::map<std::string, Tensor> weights, optimizer;
  std::vector<nlohmann::json> metrics;
};

enum class Recipe { sft, dflash, eagle3 };

Run train(Recipe recipe, const std::string& setting) {
  TempDir dir;
  const std::vector<std::string> overrides = {"train.max_steps=3", "log.every_steps=1",
                                              "train.activation_checkpointing=" + setting};
  TrainSummary summary;
  std::string run_dir;
  if (recipe == Recipe::sft) {
    const TrainConfig c = testing::tiny_config(dir, overrides);
    run_dir = c.run_dir;
    summary = train_sft(c, false);
  } else if (recipe == Recipe::dflash) {
    std::vector<std::string> o = overrides;
    o.insert(o.end(), {"draft.num_layers=3", "draft.target_layer_ids=[0, 1]"});
    const TrainConfig c = testing::tiny_dflash_config(dir, o);
    run_dir = c.run_dir;
    summary = train_draft(c, false);
  } else {
    const TrainConfig c = testing::tiny_eagle3_config(dir, overrides);
    run_dir = c.run_dir;
    summary = train_eagle3(c, false);
  }
  // The peak is measured, so not compared; every record has one.
  std::ifstream metrics(run_dir + "/metrics.jsonl");
  for (std::string line; std::getline(metrics, line);)
    EXPECT_GT(nlohmann::json::parse(line).at("peak_memory_bytes").get<double>(), 0) << line;
  return {testing::read_tensors(summary.checkpoint + "/model.safetensors"),
          testing::read_tensors(summary.checkpoint + "/optimizer.safetensors"),
          testing::metrics_of(run_dir)};
}

void expect_same_run(Recipe recipe) {
  const Run none = train(recipe, "none");
  ASSERT_EQ(none.metrics.size(), 3u);
  for (const char* setting : {"layers", "every_2"}) {
    SCOPED_TRACE(setting);
    const Run checkpointed = train(recipe, setting);
    testing::expect_bit_identical(checkpointed.weights, none.weights);
    testing::expect_bit_identical(checkpointed.optimizer, none.optimizer);
    EXPECT_EQ(checkpointed.metrics, none.metrics);
  }
}

TEST(ActivationCheckpointing, SftTrainsBitForBitAsWithout) { expect_same_run(Recipe::sft); }

TEST(ActivationCheckpointing, ADFlashDraftTrainsBitForBitAsWithout) {
  expect_same_run(Recipe::dflash);
}

TEST(ActivationCheckpointing, AnEagle3DraftTrainsBitForBitAsWithout) {
  expect_same_run(Recipe::eagle3);
}

std::string config_error(const std::string& value) {
  TempDir dir;
  try {
    testing::tiny_config(dir, {"train.activation_checkpointing=" + value});
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

TEST(ActivationCheckpointing, TheSettingReadsNoneLayersOrEveryN) {
  TempDir dir;
  EXPECT_EQ(testing::tiny_config(dir).activation_checkpointing, 0);
  EXPECT_TRUE(contains(testing::tiny_config(dir).resolved_yaml, "activation_checkpointing: none"));
  EXPECT_EQ(
      testing::tiny_config(dir, {"train.activation_checkpointing=layers"}).activation_checkpointing,
      1);
  EXPECT_EQ(testing::tiny_config(dir, {"train.activation_checkpointing=every_3"})
                .activation_checkpointing,
            3);
  for (const char* bad : {"every_0", "every_", "every_-1", "all", "every_2x", "1"})
    EXPECT_TRUE(contains(config_error(bad),
                         std::string("train.activation_checkpointing must be none, layers or "
                                     "every_<n> (n >= 1: every n-th layer), got '") +
                             bad + "'"))
        << bad;
}

TEST(ActivationCheckpointing, AResumeMayChangeIt) {
  TempDir dir;
  const TrainConfig first = testing::tiny_config(dir, {"train.max_steps=2"});
  train_sft(first, false);
  ::testing::internal::CaptureStdout();
  const TrainSummary resumed = train_sft(
      testing::tiny_config(dir, {"train.max_steps=3", "train.activation_checkpointing=layers"}),
      true);
  const std::string out = ::testing::internal::GetCapturedStdout();
  EXPECT_EQ(resumed.steps, 3);
  EXPECT_TRUE(contains(out, "train.activation_checkpointing none -> layers")) << out;
}

}  // namespace
}  // namespace sprig
