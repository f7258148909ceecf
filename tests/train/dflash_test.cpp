// sprig train dflash|domino|jetspec on the CPU: each draft learns (loss down, acceptance length
// up; Domino's lambda_base follows its curriculum), a run interrupted and resumed equals a
// straight one bit for bit (the anchor generator included), a resume with another block layout
// or recipe is refused, and bad draft settings stop before anything is written.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "autograd/functions.h"
#include "nn/checkpoint.h"
#include "speculative/draft_kind.h"
#include "tests/train/train_test_util.h"
#include "train/draft.h"
#include "train/sft.h"

namespace sprig {
namespace {

using testing::contains;
using testing::metrics_of;
using testing::read_text;
using testing::TempDir;

std::string latest_checkpoint(const std::string& run_dir) {
  std::string name;
  std::ifstream(run_dir + "/checkpoints/latest") >> name;
  return run_dir + "/checkpoints/" + name;
}

std::string dflash_error(const TrainConfig& config, bool resume = false) {
  try {
    train_draft(config, resume);
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

TEST(DFlashTrain, TheDraftLearns) {
  TempDir dir;
  const TrainConfig config =
      testing::tiny_dflash_config(dir, {"train.max_steps=120", "log.every_steps=20"});
  const TrainSummary summary = train_draft(config, false);
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

TEST(DominoTrain, TheDraftLearnsAndLambdaFollowsItsCurriculum) {
  TempDir dir;
  const TrainConfig config = testing::tiny_dflash_config(
      dir, {"train.max_steps=120", "log.every_steps=20", "draft.lambda_base_decay_ratio=0.5"},
      &speculative::domino_kind());
  const TrainSummary summary = train_draft(config, false);
  const std::vector<nlohmann::json> m = metrics_of(config.run_dir);
  ASSERT_EQ(m.size(), 6u);
  const nlohmann::json &first = m.front(), &last = m.back();
  std::cout << "loss " << first["loss"] << " -> " << last["loss"] << ", accept_len "
            << first["accept_len"] << " -> " << last["accept_len"] << ", base_accept_len "
            << first["base_accept_len"] << " -> " << last["base_accept_len"] << "\n";
  EXPECT_LT(last["final_loss"].get<double>(), first["final_loss"].get<double>() - 0.3);
  EXPECT_GT(last["accept_len"].get<double>(), first["accept_len"].get<double>() + 0.3);
  // Steps 0..19 average lambda = 1 - mean(step) / 60 = 1 - 9.5 / 60; after step 60 it is 0.
  EXPECT_NEAR(m[0]["lambda_base"].get<double>(), 1.0 - 9.5 / 60, 1e-12);
  EXPECT_EQ(m[3]["lambda_base"].get<double>(), 0.0);
  for (const char* key : {"base_loss", "base_accuracy", "base_accept_len"})
    EXPECT_TRUE(last.contains(key)) << key;
  // The checkpoint is a loadable Domino draft.
  const nlohmann::json config_json =
      nlohmann::json::parse(read_text(summary.checkpoint + "/config.json"));
  EXPECT_EQ(config_json["dflash_config"]["projector_type"], "domino");
  EXPECT_EQ(config_json["dflash_config"]["shift_label"], true);
}

TEST(JetSpecTrain, TheDraftLearnsTheTargetsDistribution) {
  TempDir dir;
  const TrainConfig config = testing::tiny_dflash_config(
      dir, {"train.max_steps=80", "log.every_steps=20", "draft.kd_temperature=2.0"},
      &speculative::jetspec_kind());
  const TrainSummary summary = train_draft(config, false);
  const std::vector<nlohmann::json> m = metrics_of(config.run_dir);
  ASSERT_EQ(m.size(), 4u);
  std::cout << "loss " << m.front()["loss"] << " -> " << m.back()["loss"] << ", accept_len "
            << m.front()["accept_len"] << " -> " << m.back()["accept_len"] << "\n";
  // A fresh target's distribution is nearly flat, so the KL starts small; it still falls by a
  // quarter, and the draft agrees with the target's argmax more often.
  EXPECT_LT(m.back()["loss"].get<double>(), 0.8 * m.front()["loss"].get<double>());
  EXPECT_GT(m.back()["accept_len"].get<double>(), m.front()["accept_len"].get<double>() + 0.1);
  const nlohmann::json j = nlohmann::json::parse(read_text(summary.checkpoint + "/config.json"));
  EXPECT_EQ(j["is_causal"], true);
  EXPECT_EQ(j["dflash_config"]["causal"], true);
}

// A recipe and its loss type, as "recipe" or "dflash/variable_prefix".
class DFlashResume : public ::testing::TestWithParam<std::string> {};

TEST_P(DFlashResume, InterruptedAndResumedRunEqualsAStraightRun) {
  const std::string param = GetParam();
  const speculative::DraftKind* kind = param == "domino"    ? &speculative::domino_kind()
                                       : param == "jetspec" ? &speculative::jetspec_kind()
                                                            : &speculative::dflash_kind();
  std::vector<std::string> overrides = {"train.max_steps=6", "checkpoint.every_steps=3",
                                        "log.every_steps=2", "train.grad_accumulation_steps=2"};
  if (kind == &speculative::dflash_kind()) overrides.push_back("draft.loss_type=" + param);
  TempDir straight_dir, split_dir;
  const auto config = [&](const TempDir& d) {
    return testing::tiny_dflash_config(d, overrides, kind);
  };
  const TrainConfig straight = config(straight_dir);
  std::map<int64_t, double> straight_losses, split_losses;
  train_draft(straight, false, [&](int64_t step, double loss) { straight_losses[step] = loss; });
  const TrainConfig split = config(split_dir);
  EXPECT_THROW(train_draft(split, false,
                           [&](int64_t step, double loss) {
                             if (step == 5) throw Interrupted{};
                             split_losses[step] = loss;
                           }),
               Interrupted);
  train_draft(split, true, [&](int64_t step, double loss) { split_losses[step] = loss; });

  ASSERT_EQ(straight_losses.size(), 6u);
  EXPECT_EQ(split_losses, straight_losses);  // exact doubles: same anchors, same prefixes
  // The logging window of steps 3 and 4 spans the checkpoint of step 3: its accuracy and
  // acceptance are still those of both steps.
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

INSTANTIATE_TEST_SUITE_P(Train, DFlashResume,
                         ::testing::Values("dflash", "variable_prefix", "domino", "jetspec"));

TEST(DFlashResume, AnotherBlockLayoutIsRefused) {
  TempDir dir;
  train_draft(testing::tiny_dflash_config(dir, {"train.max_steps=2"}), false);
  const std::string before = read_text(latest_checkpoint(dir / "run") + "/trainer_state.json");
  const std::string block = dflash_error(
      testing::tiny_dflash_config(dir, {"train.max_steps=4", "draft.block_size=5"}), true);
  EXPECT_EQ(block,
            "[train] the checkpoint's draft has block_size 4, this config 5: resume with the "
            "settings it was trained with");
  const std::string mask = dflash_error(
      testing::tiny_dflash_config(dir, {"train.max_steps=4", "draft.mask_token_id=62"}), true);
  EXPECT_TRUE(contains(mask, "mask_token_id 63, this config 62"));
  // Another recipe on the same run (a Domino draft has parameters a DFlash one does not).
  const std::string recipe = dflash_error(
      testing::tiny_dflash_config(dir, {"train.max_steps=4"}, &speculative::jetspec_kind()), true);
  EXPECT_EQ(recipe, "[train] checkpoint " + latest_checkpoint(dir / "run") +
                        " was made by sprig train dflash, not jetspec: resume it with sprig train "
                        "dflash");
  // Nor an SFT recipe (whose config differs in every section) on a draft's run.
  std::string sft;
  try {
    train_sft(testing::tiny_config(dir, {"train.max_steps=4"}), true);
  } catch (const std::exception& e) {
    sft = e.what();
  }
  EXPECT_EQ(sft, "[train] checkpoint " + latest_checkpoint(dir / "run") +
                     " was made by sprig train dflash, not sft: resume it with sprig train dflash");
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
  // Every size names its key and its value; the attention shape's 0 means the target's.
  for (const auto& [override_text, message] : std::vector<std::pair<std::string, std::string>>{
           {"draft.mask_token_id=-1", "draft.mask_token_id must be >= 0, got -1"},
           {"draft.num_layers=0", "draft.num_layers must be >= 1, got 0"},
           {"draft.num_anchors=0", "draft.num_anchors must be >= 1, got 0"},
           {"draft.sliding_window=-2", "draft.sliding_window must be >= 0 (0: none), got -2"},
           {"draft.num_attention_heads=-3",
            "draft.num_attention_heads must be >= 0 (0: the target's), got -3"},
           {"draft.head_dim=-1", "draft.head_dim must be >= 0 (0: the target's), got -1"}})
    EXPECT_TRUE(
        contains(config_error({override_text}),
                 "[config] " + message + " (from the command line: --" + override_text + ")"))
        << config_error({override_text});
  EXPECT_TRUE(contains(config_error({"draft.loss_type=mse"}), "mse"));
  EXPECT_TRUE(contains(config_error({"model.path=/x"}), "not model:"));
  // Each recipe's own keys belong to it; Domino and JetSpec take the dflash loss only.
  EXPECT_TRUE(contains(config_error({"draft.emb_dim=8"}),
                       "[config] draft.emb_dim is a setting of sprig train domino, not of sprig "
                       "train dflash"));
  auto recipe_error = [&](const speculative::DraftKind* kind,
                          const std::vector<std::string>& overrides) {
    try {
      testing::tiny_dflash_config(dir, overrides, kind);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_TRUE(contains(recipe_error(&speculative::domino_kind(), {"draft.kd_temperature=2"}),
                       "draft.kd_temperature is a setting of sprig train jetspec"));
  EXPECT_TRUE(
      contains(recipe_error(&speculative::domino_kind(), {"draft.loss_type=variable_prefix"}),
               "draft.loss_type must be dflash for sprig train domino, got "
               "variable_prefix"));
  EXPECT_TRUE(contains(recipe_error(&speculative::jetspec_kind(), {"draft.loss_decay_gamma=3"}),
                       "draft.loss_decay_gamma is a setting of sprig train dflash and sprig "
                       "train domino, not of sprig train jetspec"));
  for (const char* t : {"0", "1e-30", "1e20"})
    EXPECT_TRUE(contains(
        recipe_error(&speculative::jetspec_kind(), {std::string("draft.kd_temperature=") + t}),
        std::string("draft.kd_temperature must be in [0.01, 100], got ") + t))
        << t;
  EXPECT_TRUE(
      contains(config_error({"draft.loss_type=variable_prefix", "draft.prefix_weight_base=1e300"}),
               "draft.prefix_weight_base must be in (0, 100], got 1e300"));
  // Non-finite and out-of-range values name the key and the value as written.
  EXPECT_TRUE(contains(recipe_error(&speculative::jetspec_kind(), {"draft.kd_temperature=.inf"}),
                       "[config] draft.kd_temperature must be a finite number, got .inf"));
  EXPECT_TRUE(contains(config_error({"draft.loss_decay_gamma=.nan"}),
                       "[config] draft.loss_decay_gamma must be a finite number, got .nan"));
  for (const char* start : {"5", "-1"})
    EXPECT_TRUE(contains(
        recipe_error(&speculative::domino_kind(),
                     {std::string("draft.lambda_base_start=") + start}),
        std::string("[config] draft.lambda_base_start must be in [0, 1] (the base loss's share at "
                    "step 0), got ") +
            start))
        << start;
  for (const char* ratio : {"-0.5", "1e300"})
    EXPECT_TRUE(contains(
        recipe_error(&speculative::domino_kind(),
                     {std::string("draft.lambda_base_decay_ratio=") + ratio}),
        std::string("draft.lambda_base_decay_ratio must be in [0, 1] (the share of the steps over "
                    "which lambda_base decays), got ") +
            ratio))
        << ratio;
  // An empty list is refused, as a draft's config.json refuses it; absent means the default.
  EXPECT_TRUE(contains(config_error({"draft.target_layer_ids=[]"}),
                       "[config] draft.target_layer_ids is empty: list the target layers the draft "
                       "reads, or leave the key out for the default ids"));
  EXPECT_FALSE(contains(testing::tiny_dflash_config(dir, {}).resolved_yaml, "target_layer_ids"));
  // More draft layers than the default rule has target layers for: the default named, not -1.
  EXPECT_EQ(error_of({"draft.num_layers=5"}),
            "[draft] the default target_layer_ids for 5 draft layers over a target of 2 layers "
            "would be [1,0,0,0,-1], outside the target's layers [0, 2): set target_layer_ids (ids "
            "of target layers), or use fewer draft layers");
  // A Domino run from a draft without the head.
  train_draft(testing::tiny_dflash_config(dir, {"train.max_steps=1", "run_dir=" + (dir / "plain")}),
              false);
  const std::string init = dflash_error(testing::tiny_dflash_config(
      dir, {"draft.init=" + latest_checkpoint(dir / "plain"), "run_dir=" + (dir / "run")},
      &speculative::domino_kind()));
  EXPECT_TRUE(contains(init, "is a dflash draft: a Domino recipe needs"));
  EXPECT_FALSE(testing::fs::exists(dir / "run"));
  // From a draft, its shape holds: a shape key given as well must agree (refused naming both
  // values), and the resolved config records the draft's values, not the defaults.
  const std::string from = latest_checkpoint(dir / "plain");
  const speculative::DraftConfig plain = speculative::load_draft_config(from);
  for (const auto& [key, value] : std::vector<std::pair<std::string, std::string>>{
           {"block_size", "8"}, {"num_layers", "3"}, {"mask_token_id", "5"}})
    EXPECT_EQ(config_error({"draft.init=" + from, "draft." + key + "=" + value}),
              "[config] draft." + key + " " + value + " differs from draft.init " + from + "'s " +
                  (key == "block_size"   ? std::to_string(plain.block_size)
                   : key == "num_layers" ? std::to_string(plain.layers.num_hidden_layers)
                                         : std::to_string(plain.mask_token_id)) +
                  ": leave it out (the draft's own config holds), or train a fresh draft without "
                  "draft.init (from the command line: --draft." +
                  key + "=" + value + ")");
  const TrainConfig adopted = testing::tiny_dflash_config(
      dir, {"draft.init=" + from, "draft.block_size=" + std::to_string(plain.block_size)});
  EXPECT_EQ(adopted.dflash.draft.num_layers, plain.layers.num_hidden_layers);
  EXPECT_TRUE(contains(adopted.resolved_yaml,
                       "num_layers: " + std::to_string(plain.layers.num_hidden_layers)))
      << adopted.resolved_yaml;
  EXPECT_TRUE(contains(adopted.resolved_yaml, "target_layer_ids: [1]")) << adopted.resolved_yaml;
}

TEST(DFlashTrain, PaddedRowsTrainToo) {
  TempDir dir;
  const TrainSummary summary = train_draft(
      testing::tiny_dflash_config(dir, {"data.packing=padded", "train.max_steps=3"}), false);
  EXPECT_EQ(summary.steps, 3);
  EXPECT_TRUE(std::isfinite(summary.last_loss));
  EXPECT_GT(summary.last_loss, 0);
}

// draft.vocab: each kind trains over the even ids alone; the checkpoint holds the target's rows of
// them (lm_head.weight), d2t and t2d and loads as a draft over them; a resume over another
// vocabulary, and draft.vocab beside draft.init, are refused.
class DraftVocabTrain : public ::testing::TestWithParam<std::string> {};

TEST_P(DraftVocabTrain, TrainsOverItsIdsAndCheckpointsTheMap) {
  const speculative::DraftKind& kind = *speculative::find_draft_kind(GetParam());
  TempDir dir;
  std::vector<int64_t> even;
  for (int64_t id = 0; id < 64; id += 2) even.push_back(id);
  testing::write_text(
      dir / "vocab.json",
      nlohmann::json{{"format", "sprig-draft-vocab"}, {"vocab_size", 64}, {"draft_to_target", even}}
          .dump());
  const std::vector<std::string> overrides = {"train.max_steps=4",
                                              "draft.vocab=" + (dir / "vocab.json")};
  const TrainSummary summary =
      train_draft(testing::tiny_dflash_config(dir, overrides, &kind), false);
  EXPECT_EQ(summary.steps, 4);
  EXPECT_TRUE(std::isfinite(summary.last_loss));
  const nlohmann::json j = nlohmann::json::parse(read_text(summary.checkpoint + "/config.json"));
  EXPECT_EQ(j.at("draft_vocab_size"), 32);
  const auto meta =
      nlohmann::json::parse(read_text(summary.checkpoint + "/trainer_state.json")).at("recipe");
  EXPECT_EQ(meta.at("draft_to_target"), nlohmann::json(even));
  const auto draft = speculative::load_draft(summary.checkpoint);
  EXPECT_EQ(draft->vocabulary().draft_to_target, even);
  const auto target = load_qwen(dir / "run/target");
  const Tensor rows =
      index_select(target->head_weight().value(), 0, Tensor::from_vector(even, {32}));
  EXPECT_EQ(testing::max_abs_diff(draft->lm_head(), rows), 0.0);

  const std::string other =
      dflash_error(testing::tiny_dflash_config(dir, {"train.max_steps=6"}, &kind), true);
  EXPECT_EQ(other,
            "[train] the checkpoint's draft has another draft_to_target (draft.vocab) than this "
            "config: resume with the settings it was trained with");
  try {
    testing::tiny_dflash_config(
        dir, {"draft.init=" + summary.checkpoint, "draft.vocab=" + (dir / "vocab.json")}, &kind);
    ADD_FAILURE() << "draft.vocab beside draft.init was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_TRUE(contains(e.what(), "draft.vocab is the draft's own with draft.init")) << e.what();
  }
}

INSTANTIATE_TEST_SUITE_P(Train, DraftVocabTrain, ::testing::Values("dflash", "domino", "jetspec"));

}  // namespace
}  // namespace sprig
