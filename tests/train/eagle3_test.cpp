// sprig train eagle3 on the CPU: the draft learns the target's distribution (loss down, accuracy
// and acceptance up, every step's accuracy logged), its checkpoint is the serving layout, a run
// interrupted and resumed equals a straight one bit for bit, and the config takes EAGLE-3's keys
// and refuses the DFlash family's.
#include "train/eagle3.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tests/train/train_test_util.h"

namespace sprig {
namespace {

using testing::metrics_of;
using testing::read_text;
using testing::TempDir;
using testing::tiny_eagle3_config;

std::string config_error(const TempDir& dir, const std::vector<std::string>& overrides) {
  try {
    tiny_eagle3_config(dir, overrides);
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

TEST(Eagle3Train, TheDraftLearnsTheTargetsDistribution) {
  TempDir dir;
  const TrainConfig config = tiny_eagle3_config(dir, {"train.max_steps=80", "log.every_steps=20"});
  const TrainSummary summary = train_eagle3(config, false);
  EXPECT_EQ(summary.steps, 80);
  const std::vector<nlohmann::json> m = metrics_of(config.run_dir);
  ASSERT_EQ(m.size(), 4u);
  const nlohmann::json &first = m.front(), &last = m.back();
  std::cout << "loss " << first["loss"] << " -> " << last["loss"] << ", accuracy "
            << first["accuracy"] << " -> " << last["accuracy"] << ", accept_len "
            << first["accept_len"] << " -> " << last["accept_len"] << ", step accuracies "
            << last["step0_accuracy"] << " " << last["step1_accuracy"] << " "
            << last["step2_accuracy"] << "\n";
  EXPECT_LT(last["loss"].get<double>(), first["loss"].get<double>());
  EXPECT_GT(last["accuracy"].get<double>(), first["accuracy"].get<double>() + 0.1);
  EXPECT_GT(last["accept_len"].get<double>(), first["accept_len"].get<double>() + 0.1);
  for (const char* key : {"step0_accuracy", "step1_accuracy", "step2_accuracy"})
    EXPECT_TRUE(last.contains(key)) << key;
  // The checkpoint is an EAGLE-3 draft as the engines load it.
  const nlohmann::json j = nlohmann::json::parse(read_text(summary.checkpoint + "/config.json"));
  EXPECT_EQ(j["architectures"], nlohmann::json({"LlamaForCausalLMEagle3"}));
  EXPECT_EQ(j["eagle_config"]["eagle_aux_hidden_state_layer_ids"], nlohmann::json({0, 1}));
  const std::map<std::string, Tensor> weights =
      testing::read_tensors(summary.checkpoint + "/model.safetensors");
  EXPECT_EQ(weights.count("fc.weight"), 1u);
  EXPECT_EQ(weights.count("midlayer.self_attn.q_proj.weight"), 1u);
  const nlohmann::json meta =
      nlohmann::json::parse(read_text(summary.checkpoint + "/trainer_state.json")).at("recipe");
  EXPECT_EQ(meta.at("recipe"), "eagle3");
  EXPECT_EQ(meta.at("ttt_steps"), 3);
}

struct Interrupted {};

TEST(Eagle3Train, InterruptedAndResumedRunEqualsAStraightRun) {
  const std::vector<std::string> overrides = {"train.max_steps=6", "checkpoint.every_steps=3",
                                              "log.every_steps=2",
                                              "train.grad_accumulation_steps=2"};
  TempDir straight_dir, split_dir;
  const TrainConfig straight = tiny_eagle3_config(straight_dir, overrides);
  std::map<int64_t, double> straight_losses, split_losses;
  train_eagle3(straight, false, [&](int64_t step, double loss) { straight_losses[step] = loss; });
  const TrainConfig split = tiny_eagle3_config(split_dir, overrides);
  EXPECT_THROW(train_eagle3(split, false,
                            [&](int64_t step, double loss) {
                              if (step == 5) throw Interrupted{};
                              split_losses[step] = loss;
                            }),
               Interrupted);
  train_eagle3(split, true, [&](int64_t step, double loss) { split_losses[step] = loss; });
  ASSERT_EQ(straight_losses.size(), 6u);
  EXPECT_EQ(split_losses, straight_losses);
  EXPECT_EQ(metrics_of(split.run_dir), metrics_of(straight.run_dir));
  testing::expect_bit_identical(testing::latest_weights(split.run_dir),
                                testing::latest_weights(straight.run_dir));
}

// draft.init starts from a trained draft, whose aux layers and vocabulary hold.
TEST(Eagle3Train, DraftInitStartsFromATrainedDraft) {
  TempDir first_dir, second_dir;
  const TrainConfig first = tiny_eagle3_config(first_dir, {"train.max_steps=4"});
  const TrainSummary trained = train_eagle3(first, false);
  // A step at a vanishing learning rate leaves the init's weights as they were.
  const std::string path = second_dir / "init.yaml";
  testing::write_text(path, "run_dir: " + (second_dir / "run") +
                                "\ndevice: cpu\ntarget:\n  path: " + (first_dir / "run/target") +
                                "\ndraft:\n  init: " + trained.checkpoint +
                                "\n  ttt_steps: 3\ndata:\n  train: " +
                                testing::source_path("train/configs/tiny_docs.jsonl") +
                                "\n  seq_len: 64\n  packing: dflash\n  micro_batch_size: 2\n"
                                "train:\n  max_steps: 1\noptimizer:\n  lr: 1.0e-12\n");
  const TrainSummary resumed = train_eagle3(load_eagle3_train_config(path, {}), false);
  const std::map<std::string, Tensor> before = testing::latest_weights(first.run_dir),
                                      after = testing::latest_weights(second_dir / "run");
  ASSERT_EQ(before.size(), after.size());
  for (const auto& [name, t] : before)
    EXPECT_LE(testing::max_abs_diff(t, after.at(name)), 1e-6) << name;
  EXPECT_EQ(resumed.steps, 1);
  try {
    load_eagle3_train_config(path, {"draft.aux_layer_ids=[0, 1]"});
    ADD_FAILURE() << "draft.aux_layer_ids beside draft.init was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_TRUE(
        testing::contains(e.what(), "draft.aux_layer_ids is the draft's own with draft.init"))
        << e.what();
  }
}

TEST(Eagle3Train, ConfigTakesItsOwnKeys) {
  TempDir dir;
  const TrainConfig c = tiny_eagle3_config(dir);
  EXPECT_EQ(c.recipe_name(), "eagle3");
  EXPECT_EQ(c.eagle3_draft.ttt_steps, 3);
  EXPECT_EQ(c.eagle3_draft.draft.aux_layer_ids, (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(c.loss_normalization, LossNormalization::mean);
  EXPECT_TRUE(
      testing::contains(config_error(dir, {"draft.mask_token_id=3"}),
                        "[config] draft.mask_token_id is a setting of the DFlash drafts "
                        "(sprig train dflash, domino, jetspec), not of sprig train eagle3"));
  EXPECT_TRUE(testing::contains(config_error(dir, {"draft.ttt_steps=0"}),
                                "[config] draft.ttt_steps must be >= 1, got 0"));
  EXPECT_TRUE(testing::contains(config_error(dir, {"draft.aux_layer_ids=[]"}),
                                "[config] draft.aux_layer_ids is empty"));
  const std::string dflash = dir / "dflash.yaml";
  testing::write_text(dflash, read_text(dir / "eagle3.yaml"));
  try {
    load_train_config(dflash, {"draft.mask_token_id=3"}, &speculative::dflash_kind());
    ADD_FAILURE() << "a DFlash config with draft.ttt_steps was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_TRUE(testing::contains(
        e.what(),
        "[config] draft.aux_layer_ids is a setting of sprig train eagle3, not of sprig "
        "train dflash"))
        << e.what();
  }
}

}  // namespace
}  // namespace sprig
