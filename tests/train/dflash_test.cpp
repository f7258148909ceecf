// sprig train dflash on the CPU: the draft learns (loss down, acceptance length up), a run
// interrupted and resumed equals a straight one bit for bit (the anchor generator included), a
// resume with another block layout is refused, and bad draft settings stop before anything is
// written.
#include "train/dflash.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tests/train/train_test_util.h"

namespace sprig {
namespace {

using testing::contains;
using testing::read_text;
using testing::TempDir;

std::vector<nlohmann::json> metrics_of(const std::string& run_dir) {
  std::vector<nlohmann::json> records;
  std::ifstream in(run_dir + "/metrics.jsonl");
  for (std::string line; std::getline(in, line);) {
    nlohmann::json r = nlohmann::json::parse(line);
    for (const char* timing : {"tokens_per_s", "mfu"}) r.erase(timing);  // all else is exact
    records.push_back(r);
  }
  return records;
}

std::string latest_checkpoint(const std::string& run_dir) {
  std::string name;
  std::ifstream(run_dir + "/checkpoints/latest") >> name;
  return run_dir + "/checkpoints/" + name;
}

std::string dflash_error(const TrainConfig& config, bool resume = false) {
  try {
    train_dflash(config, resume);
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

TEST(DFlashTrain, TheDraftLearns) {
  TempDir dir;
  const TrainConfig config =
      testing::tiny_dflash_config(dir, {"train.max_steps=120", "log.every_steps=20"});
  const TrainSummary summary = train_dflash(config, false);
  EXPECT_EQ(summary.steps, 120);
  const std::vector<nlohmann::json> m = metrics_of(config.run_dir);
  ASSERT_EQ(m.size(), 6u);
  const nlohmann::json &first = m.front(), &last = m.back();
  std::cout << "loss " << first["loss"] << " -> " << last["loss"] << ", accept_len "
            << first["accept_len"] << " -> " << last["accept_len"] << "\n";
  EXPECT_LT(last["loss"].get<double>(), first["loss"].get<double>() - 0.3);
  EXPECT_GT(last["accept_len"].get<double>(), first["accept_len"].get<double>() + 0.3);
  EXPECT_GT(last["accuracy"].get<double>(), first["accuracy"].get<double>());
  // The checkpoint is a loadable draft that records its block layout and target.
  const auto meta =
      nlohmann::json::parse(read_text(summary.checkpoint + "/trainer_state.json")).at("recipe");
  EXPECT_EQ(meta.at("block_size"), 4);
  EXPECT_EQ(meta.at("mask_token_id"), 63);
  EXPECT_EQ(meta.at("target_layer_ids"), nlohmann::json({1}));
}

struct Interrupted {};

class DFlashResume : public ::testing::TestWithParam<std::string> {};

TEST_P(DFlashResume, InterruptedAndResumedRunEqualsAStraightRun) {
  const std::vector<std::string> overrides = {"draft.loss_type=" + GetParam(), "train.max_steps=6",
                                              "checkpoint.every_steps=3", "log.every_steps=1",
                                              "train.grad_accumulation_steps=2"};
  TempDir straight_dir, split_dir;
  const TrainConfig straight = testing::tiny_dflash_config(straight_dir, overrides);
  std::map<int64_t, double> straight_losses, split_losses;
  train_dflash(straight, false, [&](int64_t step, double loss) { straight_losses[step] = loss; });
  const TrainConfig split = testing::tiny_dflash_config(split_dir, overrides);
  EXPECT_THROW(train_dflash(split, false,
                            [&](int64_t step, double loss) {
                              if (step == 5) throw Interrupted{};
                              split_losses[step] = loss;
                            }),
               Interrupted);
  train_dflash(split, true, [&](int64_t step, double loss) { split_losses[step] = loss; });

  ASSERT_EQ(straight_losses.size(), 6u);
  EXPECT_EQ(split_losses, straight_losses);  // exact doubles: same anchors, same prefixes
  EXPECT_EQ(metrics_of(split.run_dir), metrics_of(straight.run_dir));
  const std::string a = latest_checkpoint(split.run_dir), b = latest_checkpoint(straight.run_dir);
  for (const char* file : {"model.safetensors", "optimizer.safetensors"})
    testing::expect_bit_identical(testing::read_tensors(a + "/" + file),
                                  testing::read_tensors(b + "/" + file));
  // The states differ only in where each run saved its fresh target.
  auto state_of = [](const std::string& dir) {
    nlohmann::json j = nlohmann::json::parse(read_text(dir + "/trainer_state.json"));
    EXPECT_EQ(j["recipe"]["target"],
              std::filesystem::absolute(dir + "/../../target").lexically_normal().string());
    j["recipe"].erase("target");
    return j;
  };
  EXPECT_EQ(state_of(a), state_of(b));
  EXPECT_EQ(read_text(a + "/config.json"), read_text(b + "/config.json"));
}

INSTANTIATE_TEST_SUITE_P(Train, DFlashResume, ::testing::Values("dflash", "variable_prefix"));

TEST(DFlashResume, AnotherBlockLayoutIsRefused) {
  TempDir dir;
  train_dflash(testing::tiny_dflash_config(dir, {"train.max_steps=2"}), false);
  const std::string before = read_text(latest_checkpoint(dir / "run") + "/trainer_state.json");
  const std::string block = dflash_error(
      testing::tiny_dflash_config(dir, {"train.max_steps=4", "draft.block_size=5"}), true);
  EXPECT_EQ(block,
            "[train] the checkpoint's draft has block_size 4, this config 5: resume with the "
            "settings it was trained with");
  const std::string mask = dflash_error(
      testing::tiny_dflash_config(dir, {"train.max_steps=4", "draft.mask_token_id=62"}), true);
  EXPECT_TRUE(contains(mask, "mask_token_id 63, this config 62"));
  EXPECT_EQ(read_text(latest_checkpoint(dir / "run") + "/trainer_state.json"), before);
}

TEST(DFlashTrain, BadDraftSettingsStopBeforeAnythingIsWritten) {
  TempDir dir;
  auto error_of = [&](const std::vector<std::string>& overrides) {
    const std::string message = dflash_error(testing::tiny_dflash_config(dir, overrides));
    EXPECT_FALSE(testing::fs::exists(dir / "run")) << message;
    return message;
  };
  EXPECT_EQ(error_of({"draft.mask_token_id=64"}),
            "[draft] mask_token_id 64 is outside the target's vocabulary [0, 64)");
  EXPECT_EQ(error_of({"draft.target_layer_ids=[0, 7]"}),
            "[draft] target_layer_ids holds 7, outside the target's layers [0, 2)");
  EXPECT_TRUE(contains(error_of({"draft.num_key_value_heads=3"}),
                       "num_attention_heads 4 is not a multiple of num_key_value_heads 3"));
  EXPECT_EQ(error_of({"data.packing=bfd"}),
            "[train] dflash trains on loss_mask rows: use data.packing dflash (packed documents) "
            "or padded (one document per row)");
  EXPECT_EQ(error_of({"target.config=/nonexistent.json"}),
            "target.config /nonexistent.json does not exist");
  // Settings the config itself rejects.
  auto config_error = [&](const std::vector<std::string>& overrides) -> std::string {
    try {
      testing::tiny_dflash_config(dir, overrides);
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_TRUE(
      contains(config_error({"draft.block_size=1"}), "draft.block_size must be >= 2, got 1"));
  EXPECT_TRUE(
      contains(config_error({"draft.mask_token_id=-1"}), "draft.mask_token_id must be >= 0"));
  EXPECT_TRUE(contains(config_error({"draft.loss_type=mse"}), "mse"));
  EXPECT_TRUE(contains(config_error({"model.path=/x"}), "not model:"));
}

TEST(DFlashTrain, PaddedRowsTrainToo) {
  TempDir dir;
  const TrainSummary summary = train_dflash(
      testing::tiny_dflash_config(dir, {"data.packing=padded", "train.max_steps=3"}), false);
  EXPECT_EQ(summary.steps, 3);
  EXPECT_TRUE(std::isfinite(summary.last_loss));
  EXPECT_GT(summary.last_loss, 0);
}

}  // namespace
}  // namespace sprig
