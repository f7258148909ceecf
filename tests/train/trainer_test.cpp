// The generic trainer (train/trainer.h) with a toy recipe: skipped micro-batches do not count
// towards the accumulation window, recipe ratios are logged and validated, recipe metadata is
// saved and checked on resume, an epoch with nothing to train on stops the run, SFT's default
// normalises over the window's tokens; with the SFT recipe, validation runs on its cadence and at
// the end and equals the token-weighted loss of the final weights. Also the progress helpers.
#include "train/trainer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "autograd/functions.h"
#include "nn/checkpoint.h"
#include "tests/test_util.h"
#include "tests/train/train_test_util.h"
#include "train/batch_input.h"
#include "train/progress.h"
#include "train/sft.h"

namespace sprig {
namespace {

using testing::metrics_of;
using testing::TempDir;

class Weights : public Module {
 public:
  Weights() { register_parameter("w", w, Tensor::from_vector<float>({0.5f, -1.0f, 2.0f}, {3})); }
  Var w;
};

// loss = sum(w * w) * (1 + first token id / 10) per token, NaN for a batch holding `nan_token`;
// every `skip_every`-th call (counting from 1) has nothing to train on. Reports 1 correct of 4
// per micro-batch.
class ToyRecipe : public Recipe {
 public:
  ToyRecipe(const data::DataConfig& data, int64_t skip_every, nlohmann::json metadata = nullptr,
            int64_t nan_token = -1)
      : data_(data),
        skip_every_(skip_every),
        metadata_(std::move(metadata)),
        nan_token_(nan_token) {}

  Module& trainable() override { return weights_; }
  const data::DataConfig& data() const override { return data_; }
  nlohmann::json checkpoint_config() const override { return {{"toy", true}}; }
  nlohmann::json checkpoint_metadata() const override { return metadata_; }
  void restore(const nlohmann::json& saved) override {
    if (saved != metadata_)
      throw std::invalid_argument("[toy] the checkpoint was made with " + saved.dump());
  }
  std::vector<RatioMetric> ratios() const override { return {{"accuracy", "correct", "count"}}; }

  std::optional<MicroBatchLoss> loss(const data::Batch& batch) override {
    ++calls;
    if (skip_every_ > 0 && calls % skip_every_ == 0) return std::nullopt;
    MicroBatchLoss m;
    const double tokens = static_cast<double>(batch.num_tokens());
    const std::vector<int64_t> ids = batch.input_ids.to_vector<int64_t>();
    const bool marked = std::find(ids.begin(), ids.end(), nan_token_) != ids.end();
    m.sum = sum_all(weights_.w * weights_.w) *
            (marked ? NAN : tokens * (1.0 + 0.1 * static_cast<double>(ids[0])));
    m.weight = tokens;
    m.tokens = batch.num_tokens();
    m.sums = {{"correct", 1.0}, {"count", 4.0}};
    return m;
  }

  int64_t calls = 0;

 private:
  Weights weights_;
  data::DataConfig data_;
  int64_t skip_every_;
  nlohmann::json metadata_;
  int64_t nan_token_;
};

nlohmann::json trainer_state(const std::string& run_dir) {
  std::string name;
  std::ifstream(run_dir + "/checkpoints/latest") >> name;
  return nlohmann::json::parse(
      testing::read_text(run_dir + "/checkpoints/" + name + "/trainer_state.json"));
}

TEST(Trainer, SkippedMicroBatchesDoNotCountTowardsTheWindow) {
  TempDir dir;
  const TrainConfig config = testing::tiny_config(
      dir, {"train.max_steps=3", "train.grad_accumulation_steps=2", "log.every_steps=1"});
  ToyRecipe recipe(config.data, /*skip_every=*/2);
  Trainer(config, false).run(recipe);
  // Calls 1, 3 make step 1; 5, 7 step 2; 9, 11 step 3; every even call was skipped.
  EXPECT_EQ(recipe.calls, 11);
  const nlohmann::json state = trainer_state(config.run_dir);
  EXPECT_EQ(state.at("skipped_micro_batches").get<int64_t>(), 5);
  EXPECT_EQ(state.at("updates").get<int64_t>(), 3);
  const auto records = metrics_of(config.run_dir);
  ASSERT_EQ(records.size(), 3u);
  for (const auto& r : records) EXPECT_DOUBLE_EQ(r.at("accuracy").get<double>(), 0.25);
}

// The toy loss scaled by the call's number, so micro-batches differ in loss per token; records each
// micro-batch's loss sum and weight.
class UnequalRecipe : public ToyRecipe {
 public:
  using ToyRecipe::ToyRecipe;
  std::optional<MicroBatchLoss> loss(const data::Batch& batch) override {
    std::optional<MicroBatchLoss> m = ToyRecipe::loss(batch);
    m->sum = m->sum * static_cast<double>(calls);
    seen.emplace_back(m->sum.value().item(), m->weight);
    return m;
  }
  std::vector<std::pair<double, double>> seen;  // (loss sum, weight) per micro-batch
};

TEST(Trainer, SftNormalisesOverTheWindowsTokensByDefault) {
  TempDir dir;
  const TrainConfig config = testing::tiny_config(
      dir, {"train.max_steps=1", "train.grad_accumulation_steps=2", "log.every_steps=1"});
  ASSERT_EQ(config.loss_normalization, LossNormalization::tokens);
  UnequalRecipe recipe(config.data, /*skip_every=*/0);
  Trainer(config, false).run(recipe);
  ASSERT_EQ(recipe.seen.size(), 2u);
  const auto [s0, w0] = recipe.seen[0];
  const auto [s1, w1] = recipe.seen[1];
  const double loss = metrics_of(config.run_dir).at(0).at("loss").get<double>();
  // The summed loss over the window's tokens, as the reference's SFT recipe divides it ...
  EXPECT_NEAR(loss, (s0 + s1) / (w0 + w1), 1e-9 * loss);
  // ... which the mean of the two micro-batch means is not.
  EXPECT_GT(std::abs(loss - (s0 / w0 + s1 / w1) / 2), 1e-3 * loss);
}

TEST(Trainer, ValidationAggregatesTheRecipesSums) {
  TempDir dir;
  const TrainConfig config = testing::tiny_config(
      dir, {"train.max_steps=2", "log.every_steps=1",
            "data.val=" + testing::source_path("train/configs/tiny_docs.jsonl")});
  ToyRecipe recipe(config.data, 0);
  Trainer(config, false).run(recipe);
  const auto records = metrics_of(config.run_dir);
  ASSERT_EQ(records.size(), 2u);
  EXPECT_FALSE(records[0].contains("val_loss"));  // val.every_steps 0: at the end only
  EXPECT_DOUBLE_EQ(records[1].at("val_accuracy").get<double>(), 0.25);
  EXPECT_GT(records[1].at("val_loss").get<double>(), 0.0);
}

// docs/semantics.md E17: validation micro-batches (loss, loss_weight, valid_tokens,
// correct_tokens, accept_len_sum, valid_blocks) = (1, 2, 2, 1, 4, 2), one skipped,
// (3, 6, 6, 6, 3, 1); training windows of (6, 4) and (1, 1) acceptance sums.
class E17Recipe : public ToyRecipe {
 public:
  using ToyRecipe::ToyRecipe;
  double mean_denominator(double weight) const override { return weight + 1e-6; }
  std::vector<RatioMetric> ratios() const override {
    return {{"accuracy", "correct_tokens", "valid_tokens"},
            {"accept_len", "accept_len_sum", "valid_blocks"}};
  }
  void begin_validation() override { val_calls = 0; }

  std::optional<MicroBatchLoss> loss(const data::Batch& batch) override {
    if (trainable().is_training()) {
      std::optional<MicroBatchLoss> m = ToyRecipe::loss(batch);
      const bool first = calls % 2 == 1;  // two micro-batches per step
      m->sums = {{"accept_len_sum", first ? 6.0 : 1.0}, {"valid_blocks", first ? 4.0 : 1.0}};
      return m;
    }
    struct Row {
      double loss, weight, valid, correct, accepted, blocks;
    };
    const std::optional<Row> rows[] = {Row{1, 2, 2, 1, 4, 2}, std::nullopt, Row{3, 6, 6, 6, 3, 1}};
    const std::optional<Row>& r = rows[val_calls++ % 3];
    if (skip_validation || !r) return std::nullopt;
    MicroBatchLoss m;
    m.sum = Var(Tensor::scalar(r->loss * mean_denominator(r->weight), DType::f64));
    m.weight = r->weight;
    m.sums = {{"valid_tokens", r->valid},
              {"correct_tokens", r->correct},
              {"accept_len_sum", r->accepted},
              {"valid_blocks", r->blocks}};
    return m;
  }

  int64_t val_calls = 0;
  bool skip_validation = false;
};

TEST(Trainer, E17ValidationAndWindowAggregation) {
  TempDir dir;
  std::string docs;  // three validation rows: documents longer than half a row
  for (int d = 0; d < 3; ++d) {
    std::vector<int64_t> ids(40, 5 + d);
    docs += nlohmann::json{{"input_ids", ids}}.dump() + "\n";
  }
  testing::write_text(dir / "val.jsonl", docs);
  for (const bool skip_all : {false, true}) {
    const TrainConfig config = testing::tiny_config(
        dir, {"train.max_steps=1", "train.grad_accumulation_steps=2", "log.every_steps=1",
              "run_dir=" + (dir / (skip_all ? "skipped" : "run")),
              "data.val=" + (dir / "val.jsonl"), "data.micro_batch_size=1"});
    E17Recipe recipe(config.data, 0);
    recipe.skip_validation = skip_all;
    Trainer(config, false).run(recipe);
    EXPECT_EQ(recipe.val_calls, 3);
    const auto records = metrics_of(config.run_dir);
    ASSERT_EQ(records.size(), 1u);
    const nlohmann::json& r = records[0];
    EXPECT_DOUBLE_EQ(r.at("accept_len").get<double>(), 7.0 / 5.0);
    EXPECT_NEAR(r.at("val_loss").get<double>(), skip_all ? 0.0 : 2.5, 1e-12);
    EXPECT_DOUBLE_EQ(r.at("val_accuracy").get<double>(), skip_all ? 0.0 : 0.875);
    EXPECT_DOUBLE_EQ(r.at("val_accept_len").get<double>(), skip_all ? 0.0 : 7.0 / 3.0);
  }
}

TEST(Trainer, RecipeMetadataIsSavedAndCheckedOnResume) {
  TempDir dir;
  const TrainConfig two = testing::tiny_config(dir, {"train.max_steps=2"});
  ToyRecipe recipe(two.data, 0, {{"block_size", 4}});
  Trainer(two, false).run(recipe);
  EXPECT_EQ(trainer_state(two.run_dir).at("recipe"), (nlohmann::json{{"block_size", 4}}));

  const TrainConfig four = testing::tiny_config(dir, {"train.max_steps=4"});
  ToyRecipe other(four.data, 0, {{"block_size", 8}});
  EXPECT_EQ(testing::invalid_argument_message([&] { Trainer(four, true).run(other); }),
            "[toy] the checkpoint was made with {\"block_size\":4}");
}

TEST(Trainer, ResumingAfterASkippedUpdateEqualsAStraightRun) {
  TempDir dir;
  // Four one-row documents; the batch of the one holding token 63 has a NaN loss.
  testing::write_text(
      dir / "docs.jsonl",
      "{\"input_ids\": [1, 2, 3, 4, 5]}\n{\"input_ids\": [6, 7, 63, 9, 10]}\n"
      "{\"input_ids\": [11, 12, 13, 14, 15]}\n{\"input_ids\": [16, 17, 18, 19, 20]}\n");
  const std::vector<std::string> overrides = {"data.train=" + (dir / "docs.jsonl"),
                                              "data.seq_len=5",
                                              "data.micro_batch_size=1",
                                              "train.max_steps=7",
                                              "checkpoint.every_steps=1",
                                              "checkpoint.keep_last=10"};
  TempDir straight_dir, split_dir;
  const TrainConfig straight = testing::tiny_config(straight_dir, overrides);
  ToyRecipe straight_recipe(straight.data, 0, nullptr, 63);
  std::vector<double> losses;
  Trainer(straight, false).run(straight_recipe, [&](int64_t, double l) { losses.push_back(l); });
  const auto nan_step =
      std::find_if(losses.begin(), losses.end(), [](double l) { return std::isnan(l); }) -
      losses.begin() + 1;
  ASSERT_LE(nan_step, 4);  // in the first epoch, with updates after it
  EXPECT_EQ(trainer_state(straight.run_dir).at("updates").get<int64_t>(), 5);  // 7 steps, 2 skipped

  // Stopped during the step after the skipped one, then resumed from the skipped step's checkpoint.
  const TrainConfig split = testing::tiny_config(split_dir, overrides);
  ToyRecipe first(split.data, 0, nullptr, 63);
  struct Stop {};
  EXPECT_THROW(Trainer(split, false)
                   .run(first,
                        [&](int64_t step, double) {
                          if (step == nan_step + 1) throw Stop{};
                        }),
               Stop);
  ToyRecipe second(split.data, 0, nullptr, 63);
  Trainer(split, true).run(second);
  testing::expect_bit_identical(testing::latest_weights(split.run_dir),
                                testing::latest_weights(straight.run_dir));
  EXPECT_EQ(trainer_state(split.run_dir), trainer_state(straight.run_dir));
}

TEST(Trainer, AnEpochWithNothingToTrainOnStopsTheRun) {
  TempDir dir;
  const TrainConfig config = testing::tiny_config(dir);
  ToyRecipe recipe(config.data, /*skip_every=*/1);
  try {
    Trainer(config, false).run(recipe);
    FAIL() << "the run did not stop";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()),
              "[train] no micro-batch of a whole epoch (4 batches) had anything to train on");
  }
}

TEST(Trainer, SftValidatesOnItsCadenceAndAtTheEnd) {
  TempDir dir;
  const std::string docs = testing::source_path("train/configs/tiny_docs.jsonl");
  const TrainConfig config = testing::tiny_config(
      dir, {"train.max_steps=5", "log.every_steps=1", "val.every_steps=2", "data.val=" + docs});
  const TrainSummary summary = train_sft(config, false);
  std::vector<int64_t> validated;
  double last_val = 0;
  for (const auto& r : metrics_of(config.run_dir))
    if (r.contains("val_loss")) {
      validated.push_back(r.at("step").get<int64_t>());
      last_val = r.at("val_loss").get<double>();
    }
  EXPECT_EQ(validated, (std::vector<int64_t>{2, 4, 5}));

  // The token-weighted next-token loss of the final weights over the val split, computed here.
  const auto model = load_qwen(summary.checkpoint);
  data::DataConfig val_config = config.data;
  val_config.vocab_size = model->config().vocab_size;
  data::DataLoader val(val_config, data::Split::val);
  NoGradGuard no_grad;
  double sum = 0;
  int64_t tokens = 0;
  for (int64_t i = 0; i < val.batches_per_epoch(); ++i) {
    const data::Batch batch = val.next();
    const QwenInput in = batch_input(batch, model->config(), Device::cpu());
    sum += sum_all(model->token_losses(model->hidden(in), batch.labels)).value().item();
    for (int64_t label : batch.labels.to_vector<int64_t>()) tokens += label != data::kIgnoreIndex;
  }
  EXPECT_NEAR(last_val, sum / static_cast<double>(tokens), 1e-6);
}

TEST(Progress, PeakTableAndDurations) {
  EXPECT_EQ(peak_bf16_flops("NVIDIA H200"), 989e12);
  EXPECT_EQ(peak_bf16_flops("NVIDIA H100 80GB HBM3"), 989e12);
  EXPECT_EQ(peak_bf16_flops("NVIDIA A100-SXM4-80GB"), 312e12);
  EXPECT_EQ(peak_bf16_flops("Tesla T4"), 0.0);  // unknown: no MFU shown
  EXPECT_EQ(format_duration(245.9), "4m05s");
  EXPECT_EQ(format_duration(3725), "1h02m05s");
}

}  // namespace
}  // namespace sprig
