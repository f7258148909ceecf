// Exact resume on the CPU: a run of 2N steps and a run interrupted after N steps then resumed give
// bit-identical per-step losses, metrics (a logging window that spans the interruption included),
// weights, optimizer state and trainer state, with and without gradient accumulation.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tests/cli_run.h"
#include "tests/train/train_test_util.h"
#include "train/checkpoint.h"
#include "train/draft.h"
#include "train/sft.h"

namespace sprig {
namespace {

using testing::read_text;
using testing::TempDir;

// What a run of the tiny config leaves behind.
struct RunRecord {
  std::map<int64_t, double> losses;     // per step, from on_step
  std::vector<nlohmann::json> metrics;  // metrics.jsonl's records without the timings
  std::string checkpoint;               // the latest checkpoint's directory
};

RunRecord record_of(const std::string& run_dir, std::map<int64_t, double> losses) {
  RunRecord r{std::move(losses), testing::metrics_of(run_dir), {}};
  std::string name;
  std::ifstream(run_dir + "/checkpoints/latest") >> name;
  r.checkpoint = run_dir + "/checkpoints/" + name;
  return r;
}

struct Interrupted {};

struct ResumeCase {
  int64_t grad_accumulation_steps;
  std::string loss_normalization;
};

void PrintTo(const ResumeCase& c, std::ostream* os) {
  *os << "accumulation " << c.grad_accumulation_steps << ", " << c.loss_normalization;
}

class Resume : public ::testing::TestWithParam<ResumeCase> {};

TEST_P(Resume, InterruptedAndResumedRunEqualsAStraightRun) {
  constexpr int64_t N = 3;
  const std::vector<std::string> overrides = {
      "train.max_steps=" + std::to_string(2 * N),
      "train.grad_accumulation_steps=" + std::to_string(GetParam().grad_accumulation_steps),
      "train.loss_normalization=" + GetParam().loss_normalization,
      "checkpoint.every_steps=" + std::to_string(N), "log.every_steps=2"};  // N odd: a window
                                                                            // spans the stop

  TempDir straight_dir;
  const TrainConfig straight_config = testing::tiny_config(straight_dir, overrides);
  std::map<int64_t, double> straight_losses;
  train_sft(straight_config, false,
            [&](int64_t step, double loss) { straight_losses[step] = loss; });
  const RunRecord straight = record_of(straight_config.run_dir, straight_losses);
  ASSERT_EQ(straight.losses.size(), static_cast<size_t>(2 * N));

  // The same run stopped during step N + 1 (after the checkpoint of step N), then resumed.
  TempDir split_dir;
  const TrainConfig split_config = testing::tiny_config(split_dir, overrides);
  std::map<int64_t, double> split_losses;
  EXPECT_THROW(train_sft(split_config, false,
                         [&](int64_t step, double loss) {
                           if (step == N + 1) throw Interrupted{};
                           split_losses[step] = loss;
                         }),
               Interrupted);
  ASSERT_EQ(split_losses.size(), static_cast<size_t>(N));
  const TrainSummary summary =
      train_sft(split_config, true, [&](int64_t step, double loss) { split_losses[step] = loss; });
  EXPECT_EQ(summary.steps, 2 * N);
  const RunRecord split = record_of(split_config.run_dir, split_losses);

  EXPECT_EQ(split.losses, straight.losses);  // exact doubles
  // The records after the interruption were replaced; the window of steps N and N + 1 averages
  // both (the checkpoint of step N holds its open half).
  ASSERT_EQ(straight.metrics.size(), static_cast<size_t>(N));
  EXPECT_EQ(straight.metrics[1]["step"], N + 1);
  EXPECT_EQ(straight.metrics[1]["loss"].get<double>(),
            (straight.losses.at(N) + straight.losses.at(N + 1)) / 2);
  EXPECT_EQ(split.metrics, straight.metrics);
  testing::expect_bit_identical(testing::read_tensors(split.checkpoint + "/model.safetensors"),
                                testing::read_tensors(straight.checkpoint + "/model.safetensors"));
  testing::expect_bit_identical(
      testing::read_tensors(split.checkpoint + "/optimizer.safetensors"),
      testing::read_tensors(straight.checkpoint + "/optimizer.safetensors"));
  EXPECT_EQ(read_text(split.checkpoint + "/trainer_state.json"),
            read_text(straight.checkpoint + "/trainer_state.json"));
}

INSTANTIATE_TEST_SUITE_P(Train, Resume,
                         ::testing::Values(ResumeCase{1, "mean"}, ResumeCase{2, "mean"},
                                           ResumeCase{2, "tokens"}),
                         [](const auto& info) {
                           return "accumulate" +
                                  std::to_string(info.param.grad_accumulation_steps) + "_" +
                                  info.param.loss_normalization;
                         });

TEST(Resume, WithoutCheckpointsStartsFreshAndKeepsTheNewestK) {
  TempDir dir;
  const TrainConfig config = testing::tiny_config(
      dir, {"train.max_steps=4", "checkpoint.every_steps=1", "checkpoint.keep_last=2"});
  std::vector<int64_t> steps;
  const TrainSummary summary =
      train_sft(config, /*resume=*/true, [&](int64_t step, double) { steps.push_back(step); });
  EXPECT_EQ(summary.checkpoint, config.run_dir + "/checkpoints/step_00000004");
  EXPECT_EQ(steps, (std::vector<int64_t>{1, 2, 3, 4}));
  std::vector<std::string> names;
  for (const auto& e : testing::fs::directory_iterator(config.run_dir + "/checkpoints"))
    names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"latest", "step_00000003", "step_00000004"}));
  EXPECT_EQ(read_text(config.run_dir + "/checkpoints/latest"), "step_00000004\n");
  // A finished run resumed does nothing more.
  const TrainSummary again = train_sft(config, true);
  EXPECT_EQ(again.steps, 4);
  EXPECT_EQ(again.checkpoint, summary.checkpoint);
}

// A run directory, its checkpoints/ and checkpoints/latest all stand for the newest checkpoint,
// wherever a model is read: a config's model.path too, recorded resolved.
// An SFT run resumed by a draft recipe: refused in one sentence naming the recipe that made it,
// before its config is compared section by section.
TEST(Resume, AnotherRecipesRunIsRefusedNamingIt) {
  TempDir dir;
  train_sft(testing::tiny_config(dir, {"train.max_steps=2"}), false);
  std::string error;
  try {
    train_draft(testing::tiny_dflash_config(dir, {"train.max_steps=4"}), true);
  } catch (const std::exception& e) {
    error = e.what();
  }
  EXPECT_EQ(error, "[train] checkpoint " + (dir / "run/checkpoints/step_00000002") +
                       " was made by sprig train sft, not dflash: resume it with sprig train sft");
}

TEST(Resume, ARunStandsForItsLatestCheckpoint) {
  TempDir dir;
  const TrainConfig config =
      testing::tiny_config(dir, {"train.max_steps=3", "checkpoint.every_steps=2"});
  train_sft(config, false);
  const std::string newest = config.run_dir + "/checkpoints/step_00000003";
  for (const std::string& given :
       {config.run_dir, config.run_dir + "/checkpoints", config.run_dir + "/checkpoints/latest"})
    EXPECT_EQ(follow_latest(given), newest) << given;
  const std::string older = config.run_dir + "/checkpoints/step_00000002";
  EXPECT_EQ(follow_latest(older), older);  // a checkpoint is itself
  EXPECT_EQ(follow_latest(dir / "nowhere"), dir / "nowhere");
  const TrainConfig from_run = testing::tiny_config(
      dir, {"model=" + std::string("{path: ") + config.run_dir + "}", "run_dir=" + (dir / "next")});
  EXPECT_EQ(from_run.model_path, newest);
  EXPECT_TRUE(testing::contains(from_run.resolved_yaml, "path: " + newest));
  // A `latest` that names nothing is said, not skipped.
  testing::write_text(config.run_dir + "/checkpoints/latest", "step_00000009\n");
  EXPECT_EQ(testing::runtime_error_message([&] { follow_latest(config.run_dir); }),
            config.run_dir +
                "/checkpoints/latest names a checkpoint \"step_00000009\" that does "
                "not exist");
}

TEST(Resume, ARunAtOrPastItsEndSaysItIsCompleteAndTrainsNothing) {
  TempDir dir;
  const TrainConfig config = testing::tiny_config(dir, {"train.max_steps=4"});
  train_sft(config, false);
  const std::string metrics = read_text(config.run_dir + "/metrics.jsonl");
  for (const int64_t max_steps : {4, 2}) {
    const TrainConfig shorter =
        testing::tiny_config(dir, {"train.max_steps=" + std::to_string(max_steps)});
    bool trained = false;
    ::testing::internal::CaptureStdout();
    const TrainSummary summary = train_sft(shorter, true, [&](int64_t, double) { trained = true; });
    const std::string out = ::testing::internal::GetCapturedStdout();
    EXPECT_FALSE(trained);
    EXPECT_EQ(summary.steps, 4);
    EXPECT_EQ(summary.stopped_by_signal, 0);
    EXPECT_EQ(summary.checkpoint, config.run_dir + "/checkpoints/step_00000004");
    EXPECT_TRUE(testing::contains(
        out, "run already complete at step 4 (train.max_steps " + std::to_string(max_steps) +
                 "): nothing to train; run directory " + config.run_dir + "\n"))
        << out;
    EXPECT_FALSE(testing::contains(out, "last loss")) << out;
    EXPECT_FALSE(testing::contains(out, "training ")) << out;
    EXPECT_EQ(read_text(config.run_dir + "/metrics.jsonl"), metrics);
  }
  // The command exits 0 with that line.
  const testing::CliRun cli =
      testing::run_sprig("train sft -c " + (dir / "config.yaml") + " --train.max_steps=4 --resume",
                         dir.path().string());
  EXPECT_EQ(cli.exit_code, 0) << cli.err;
  EXPECT_TRUE(testing::contains(cli.out, "run already complete at step 4 (train.max_steps 4)"))
      << cli.out;
  EXPECT_EQ(read_text(config.run_dir + "/metrics.jsonl"), metrics);
}

// The message of the std::invalid_argument train_sft throws ("" when it returns).
std::string resume_error(const TrainConfig& config) {
  try {
    train_sft(config, true);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

TEST(Resume, ChangedSettingsThatAlterTheRunAreRefusedListingEachOne) {
  TempDir dir;
  const std::vector<std::string> base = {"train.max_steps=2", "checkpoint.every_steps=1"};
  const TrainConfig first = testing::tiny_config(dir, base);
  train_sft(first, false);
  const std::string checkpoint = first.run_dir + "/checkpoints/step_00000002";
  EXPECT_EQ(read_text(checkpoint + "/config.resolved.yaml"),
            read_text(first.run_dir + "/config.resolved.yaml"));
  const std::string metrics = read_text(first.run_dir + "/metrics.jsonl"),
                    resolved = read_text(first.run_dir + "/config.resolved.yaml");

  auto with = [&](std::vector<std::string> more) {
    more.insert(more.begin(), base.begin(), base.end());
    return more;
  };
  const TrainConfig changed = testing::tiny_config(
      dir, with({"train.max_steps=4", "data.seq_len=32", "optimizer.lr=0.01"}));
  EXPECT_EQ(resume_error(changed), "[train] the config differs from the one checkpoint " +
                                       checkpoint +
                                       " was trained with: data.seq_len 64 -> 32, optimizer.lr "
                                       "3.0e-3 -> 0.01; resume with its settings, or pass "
                                       "--allow-config-change to continue with these");
  EXPECT_EQ(read_text(first.run_dir + "/checkpoints/latest"), "step_00000002\n");
  EXPECT_EQ(read_text(first.run_dir + "/metrics.jsonl"), metrics);
  EXPECT_EQ(read_text(first.run_dir + "/config.resolved.yaml"), resolved);

  // Allowed, the changes are printed and the run continues with them.
  TrainConfig allowed = changed;
  allowed.allow_config_change = true;
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(train_sft(allowed, true).steps, 4);
  EXPECT_TRUE(testing::contains(::testing::internal::GetCapturedStderr(),
                                "[train] warning: continuing checkpoint " + checkpoint +
                                    " with changed settings: data.seq_len 64 -> 32, optimizer.lr "
                                    "3.0e-3 -> 0.01\n"));
  EXPECT_TRUE(testing::contains(
      read_text(first.run_dir + "/checkpoints/step_00000004/config.resolved.yaml"), "seq_len: 32"));
}

TEST(Resume, ChangedLengthAndCadenceContinueAsTheLongerRun) {
  // A run of 2 steps extended to 4, logging and checkpointing otherwise: no setting that alters
  // what it computes changed, so it continues, reporting the changes on stdout.
  TempDir dir;
  const TrainConfig first = testing::tiny_config(dir, {"train.max_steps=2"});
  train_sft(first, false);
  const TrainConfig longer =
      testing::tiny_config(dir, {"train.max_steps=4", "log.every_steps=1",
                                 "checkpoint.every_steps=2", "checkpoint.keep_last=5"});
  ::testing::internal::CaptureStdout();
  const TrainSummary summary = train_sft(longer, true);
  const std::string out = ::testing::internal::GetCapturedStdout();
  EXPECT_EQ(summary.steps, 4);
  EXPECT_TRUE(
      testing::contains(out,
                        "resuming with checkpoint.every_steps 0 -> 2, checkpoint.keep_last 2 -> 5, "
                        "log.every_steps 100 -> 1, train.max_steps 2 -> 4\n"));
}

}  // namespace
}  // namespace sprig
