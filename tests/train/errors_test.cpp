// What `train_sft` does with bad runs and bad input: the non-finite guard (updates skipped and
// counted, the run stopped after too many in a row), and one clear error, before any checkpoint
// is touched, for missing or unreadable model and data, a vocabulary mismatch, a run directory
// that cannot be written, a corrupt checkpoint on resume and a run directory already in use.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <nlohmann/json.hpp>
#include <set>

#include "nn/checkpoint.h"
#include "tests/train/train_test_util.h"
#include "train/draft.h"
#include "train/memory.h"
#include "train/sft.h"

namespace sprig {
namespace {

using testing::contains;
using testing::read_text;
using testing::TempDir;
namespace fs = std::filesystem;

// The message of the exception train_sft throws ("" when it returns).
std::string train_error(const TrainConfig& config, bool resume = false) {
  try {
    train_sft(config, resume);
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

// Every file under `dir` with its bytes.
std::map<std::string, std::string> snapshot(const std::string& dir) {
  std::map<std::string, std::string> files;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file()) files[e.path().string()] = read_text(e.path().string());
  return files;
}

// Runs `config` until the guard stops it; returns the per-step losses and the message.
std::pair<std::vector<double>, std::string> run_until_stopped(const TrainConfig& config) {
  std::vector<double> losses;
  try {
    train_sft(config, false, [&](int64_t, double loss) { losses.push_back(loss); });
  } catch (const std::runtime_error& e) {
    return {losses, e.what()};
  }
  return {losses, ""};
}

// The gradient norm metrics.jsonl logged for `step`, as a message prints it.
std::string gradient_norm_of_step(const std::string& run_dir, int64_t step) {
  std::ifstream in(run_dir + "/metrics.jsonl");
  for (std::string line; std::getline(in, line);) {
    const nlohmann::json r = nlohmann::json::parse(line);
    if (r.at("step") == step) {
      std::ostringstream os;
      os << r.at("grad_norm").get<double>();
      return os.str();
    }
  }
  return "(no record of step " + std::to_string(step) + ")";
}

const std::vector<std::string> kGuardOverrides = {
    "train.max_steps=20", "train.max_consecutive_skips=3", "checkpoint.every_steps=1",
    "checkpoint.keep_last=10", "log.every_steps=1"};

std::vector<std::string> with(std::vector<std::string> overrides,
                              const std::vector<std::string>& more) {
  overrides.insert(overrides.end(), more.begin(), more.end());
  return overrides;
}

TEST(NonFiniteGuard, NonFiniteGradientsSkipUpdatesAndAreCounted) {
  TempDir dir;
  // An absurd learning rate: the first update blows the weights up; every later gradient is NaN
  // (the loss stays finite: the RMS norms rescale the huge activations).
  const TrainConfig config = testing::tiny_config(
      dir, with(kGuardOverrides,
                {"optimizer.lr=1e30", "optimizer.weight_decay=0", "scheduler.warmup_steps=0"}));
  const auto [losses, message] = run_until_stopped(config);
  EXPECT_EQ(message,
            "[train] steps 2 to 5 had a non-finite loss or gradient (4 in a row, more than "
            "train.max_consecutive_skips 3): stopping; the last update was step 1 (learning rate "
            "1e+30, gradient norm " +
                gradient_norm_of_step(config.run_dir, 1) +
                "): if the losses before it were finite, lower optimizer.lr");
  EXPECT_EQ(losses.size(), 4u);  // the fifth step (fourth skip in a row) stopped the run

  // Skipped steps leave weights and moments alone, and are counted.
  const std::string ckpt = config.run_dir + "/checkpoints/step_0000000";
  const auto weights_after_1 = testing::read_tensors(ckpt + "1/model.safetensors");
  const auto moments_after_1 = testing::read_tensors(ckpt + "1/optimizer.safetensors");
  for (int step = 2; step <= 4; ++step) {
    const std::string at = ckpt + std::to_string(step);
    testing::expect_bit_identical(testing::read_tensors(at + "/model.safetensors"),
                                  weights_after_1);
    testing::expect_bit_identical(testing::read_tensors(at + "/optimizer.safetensors"),
                                  moments_after_1);
    const auto state = nlohmann::json::parse(read_text(at + "/trainer_state.json"));
    EXPECT_EQ(state.at("skipped_steps").get<int64_t>(), step - 1);
  }
  std::vector<int64_t> logged_skips;
  std::ifstream metrics(config.run_dir + "/metrics.jsonl");
  for (std::string line; std::getline(metrics, line);)
    logged_skips.push_back(nlohmann::json::parse(line).at("skipped_steps").get<int64_t>());
  EXPECT_EQ(logged_skips, (std::vector<int64_t>{0, 1, 2, 3}));
}

// A starting checkpoint in `dir` whose final norm is finite but so large that the logits overflow:
// every loss is non-finite (a checkpoint holding NaN itself is refused when it loads).
std::string overflowing_model(const TempDir& dir) {
  Generator gen(1);
  QwenForCausalLM model(QwenConfig::load(testing::source_path("train/configs/tiny_qwen3.json")),
                        gen);
  model.model.norm->weight.value().fill_(3e38);
  save_qwen(model, dir / "nan_model");
  return dir / "nan_model";
}

TEST(NonFiniteGuard, NonFiniteLossesStopTheRun) {
  TempDir dir;
  const TrainConfig config = testing::tiny_config(
      dir, with(kGuardOverrides, {"model={path: " + overflowing_model(dir) + "}"}));
  const auto [losses, message] = run_until_stopped(config);
  EXPECT_EQ(message,
            "[train] steps 1 to 4 had a non-finite loss or gradient (4 in a row, more than "
            "train.max_consecutive_skips 3): stopping; no step of this run updated the weights: "
            "the starting weights or the data give non-finite values");
  ASSERT_EQ(losses.size(), 3u);
  for (double loss : losses) EXPECT_FALSE(std::isfinite(loss));
  const auto state = nlohmann::json::parse(
      read_text(config.run_dir + "/checkpoints/step_00000003/trainer_state.json"));
  EXPECT_EQ(state.at("skipped_steps").get<int64_t>(), 3);
}

// A run that ends with every step skipped fails, and writes no checkpoint.
TEST(NonFiniteGuard, ARunWhoseEveryStepWasSkippedFails) {
  TempDir dir;
  const TrainConfig config = testing::tiny_config(
      dir, {"train.max_steps=2", "model={path: " + overflowing_model(dir) + "}"});
  EXPECT_EQ(train_error(config),
            "[train] every step of this run (1 to 2) had a non-finite loss or gradient and was "
            "skipped: nothing was trained, and no checkpoint is written; no step of this run "
            "updated the weights: the starting weights or the data give non-finite values");
  EXPECT_FALSE(fs::exists(config.run_dir + "/checkpoints/latest"));
}

// An update that overflows the weights (the learning rate times the step exceeds fp32's range)
// stops the run at the next checkpoint, which is not written; the earlier one stays latest.
TEST(NonFiniteGuard, NonFiniteWeightsAreNeverSaved) {
  TempDir dir;
  const TrainConfig first = testing::tiny_config(dir, {"train.max_steps=2"});
  train_sft(first, false);
  TrainConfig config =
      testing::tiny_config(dir, {"train.max_steps=4", "checkpoint.every_steps=2",
                                 "optimizer.lr=1e39", "optimizer.weight_decay=0",
                                 "scheduler.warmup_steps=0", "train.max_consecutive_skips=5"});
  config.allow_config_change = true;
  const std::string error = train_error(config, true);
  EXPECT_TRUE(contains(error, "[train] step 4: "));
  EXPECT_TRUE(contains(error,
                       " holds non-finite values, so no checkpoint is written (the last "
                       "one, " +
                           config.run_dir +
                           "/checkpoints/step_00000002, is intact); the "
                           "update of step 3 (learning rate "))
      << error;
  EXPECT_TRUE(contains(error, " non-finite: lower optimizer.lr")) << error;
  EXPECT_EQ(read_text(config.run_dir + "/checkpoints/latest"), "step_00000002\n");
  EXPECT_FALSE(fs::exists(config.run_dir + "/checkpoints/step_00000004"));
}

TEST(BadInput, MissingModel) {
  TempDir dir;
  EXPECT_EQ(train_error(testing::tiny_config(dir, {"model={path: /nonexistent/ckpt}"})),
            "model.path /nonexistent/ckpt is not a directory");
  EXPECT_EQ(train_error(testing::tiny_config(dir, {"model={config: /nonexistent/config.json}"})),
            "model.config /nonexistent/config.json does not exist");
  fs::create_directories(dir / "empty_ckpt");
  EXPECT_TRUE(contains(
      train_error(testing::tiny_config(dir, {"model={path: " + (dir / "empty_ckpt") + "}"})),
      dir / "empty_ckpt has no config.json: it is not a model directory"));
  EXPECT_FALSE(fs::exists(dir / "run"));  // a run that cannot start leaves no run directory
}

TEST(BadInput, UnreadableModelWeights) {
  TempDir dir;
  const TrainConfig first = testing::tiny_config(dir, {"train.max_steps=1"});
  train_sft(first, false);
  const std::string ckpt = first.run_dir + "/checkpoints/step_00000001";
  fs::resize_file(ckpt + "/model.safetensors", 100);
  const std::string message = train_error(
      testing::tiny_config(dir, {"model={path: " + ckpt + "}", "run_dir=" + (dir / "second")}));
  EXPECT_TRUE(contains(message, ckpt + "/model.safetensors: "));
  EXPECT_TRUE(contains(message, "truncated"));
}

TEST(BadInput, MissingDataAndVocabularyMismatch) {
  TempDir dir;
  EXPECT_EQ(train_error(testing::tiny_config(dir, {"data.train=/nonexistent/docs.jsonl"})),
            "[data] cannot open /nonexistent/docs.jsonl: No such file or directory");
  // The tiny model has 64 tokens; id 70 on line 2 does not exist.
  testing::write_text(dir / "docs.jsonl",
                      "{\"input_ids\": [1, 2, 3, 4]}\n{\"input_ids\": [1, 70, 3, 4]}\n");
  EXPECT_EQ(train_error(testing::tiny_config(dir, {"data.train=" + (dir / "docs.jsonl")})),
            dir / "docs.jsonl" + ":2: \"input_ids\"[1] = 70 is not a token id in [0, 64)");
  EXPECT_EQ(train_error(testing::tiny_config(dir, {"data.vocab_size=100"})),
            "[train] data.vocab_size 100 exceeds the model's vocabulary of 64");
  EXPECT_FALSE(fs::exists(dir / "run"));
}

TEST(BadInput, RunDirectoryThatCannotBeWritten) {
  TempDir dir;
  testing::write_text(dir / "file", "not a directory");
  EXPECT_EQ(train_error(testing::tiny_config(dir, {"run_dir=" + (dir / "file/run")})),
            "run_dir " + (dir / "file/run") + " is not writable: Not a directory");
}

TEST(BadInput, CorruptCheckpointOnResumeDamagesNothing) {
  TempDir dir;
  const TrainConfig config = testing::tiny_config(
      dir, {"train.max_steps=2", "checkpoint.every_steps=1", "checkpoint.keep_last=3"});
  train_sft(config, false);
  const std::string checkpoints = config.run_dir + "/checkpoints";
  fs::resize_file(checkpoints + "/step_00000002/model.safetensors", 1000);
  const auto before = snapshot(checkpoints);

  const TrainConfig longer = testing::tiny_config(
      dir, {"train.max_steps=4", "checkpoint.every_steps=1", "checkpoint.keep_last=3"});
  const std::string message = train_error(longer, /*resume=*/true);
  EXPECT_TRUE(contains(message, "checkpoint " + checkpoints + "/step_00000002 is corrupt: "));
  EXPECT_TRUE(contains(message, "the file is truncated"));
  EXPECT_EQ(snapshot(checkpoints), before);

  // `latest` naming a checkpoint that is not there.
  testing::write_text(checkpoints + "/latest", "step_00000009\n");
  const auto renamed = snapshot(checkpoints);
  EXPECT_EQ(train_error(longer, true),
            checkpoints + "/latest names a checkpoint \"step_00000009\" that does not exist");
  EXPECT_EQ(snapshot(checkpoints), renamed);
}

// Resume trusts nothing it reads: a trainer state or an optimizer state edited by hand is refused
// with the file and the field, before anything is trained or written.
TEST(BadInput, ATamperedCheckpointIsRefusedNamingTheFileAndTheField) {
  TempDir dir;
  const std::string pristine = dir / "pristine";
  train_sft(testing::tiny_config(dir, {"train.max_steps=2", "run_dir=" + pristine}), false);
  const std::string run = dir / "run", ckpt = run + "/checkpoints/step_00000002";
  // The error of resuming a fresh copy of the run after `edit`.
  const auto resumed_after = [&](const std::function<void()>& edit) {
    fs::remove_all(run);
    fs::copy(pristine, run, fs::copy_options::recursive);
    edit();
    const auto before = snapshot(run);
    const std::string error = train_error(testing::tiny_config(dir, {"train.max_steps=4"}), true);
    EXPECT_EQ(snapshot(run), before) << error;
    return error;
  };
  const auto state_edit = [&](const std::function<void(nlohmann::json&)>& change) {
    return resumed_after([&] {
      nlohmann::json state = nlohmann::json::parse(read_text(ckpt + "/trainer_state.json"));
      change(state);
      testing::write_text(ckpt + "/trainer_state.json", state.dump());
    });
  };
  const std::string state_file = "[train] checkpoint " + ckpt + "/trainer_state.json: ";
  EXPECT_EQ(state_edit([](auto& j) { j["updates"] = 1000000; }),
            state_file +
                "updates 1000000 and skipped_steps 0 do not add up to step 2 (every step updates "
                "or is skipped)");
  EXPECT_EQ(state_edit([](auto& j) { j["updates"] = "2"; }),
            state_file + "updates is \"2\", not an integer >= 0");
  EXPECT_EQ(state_edit([](auto& j) { j["tokens"] = -5; }),
            state_file + "tokens is -5, not an integer >= 0");
  EXPECT_EQ(state_edit([](auto& j) { j["total_steps"] = 1; }),
            state_file + "step 2 is past total_steps 1, the schedule it was saved in");
  EXPECT_EQ(state_edit([](auto& j) { j.erase("rng"); }), state_file + "it has no rng.seed");
  EXPECT_TRUE(
      contains(state_edit([](auto& j) { j["loader"]["batch"] = 99999; }), state_file + "loader: "));
  // A step that is not its directory's.
  EXPECT_EQ(state_edit([](auto& j) { j["step"] = -1; }),
            ckpt + " is named like a checkpoint but is not one sprig wrote (" + ckpt +
                "/trainer_state.json says step -1, its directory step 2): a checkpoint of that "
                "step would replace it; move it out of " +
                run + "/checkpoints");

  // The masters and moments: f32, their parameter's shape, finite, no negative second moment.
  const std::string name = "model.norm.weight";
  const auto tensor_edit = [&](const std::string& file, const std::string& key,
                               const std::function<Tensor(const Tensor&)>& change) {
    return resumed_after([&] {
      auto tensors = testing::read_tensors(ckpt + "/" + file);
      std::vector<SafetensorsEntry> entries;
      for (const auto& [n, t] : tensors) entries.push_back({n, n == key ? change(t) : t});
      save_safetensors(ckpt + "/" + file, entries);
    });
  };
  const auto with_first = [](float value) {
    return [value](const Tensor& t) {
      std::vector<float> v = t.to_vector<float>();
      v[0] = value;
      return Tensor::from_vector(v, t.shape());
    };
  };
  const std::string n = std::to_string(
      testing::read_tensors(pristine + "/checkpoints/step_00000002/model.safetensors")
          .at(name)
          .numel());
  const std::string optimizer = "[train] checkpoint " + ckpt + ": optimizer.safetensors: \"";
  EXPECT_EQ(tensor_edit("optimizer.safetensors", name + ".exp_avg_sq", with_first(-1.0f)),
            optimizer + name + ".exp_avg_sq\" holds 1 negative values of " + n +
                ": a second moment is never negative");
  EXPECT_EQ(tensor_edit("optimizer.safetensors", name + ".exp_avg", with_first(NAN)),
            optimizer + name + ".exp_avg\" holds 1 non-finite values (NaN or inf) of " + n);
  EXPECT_EQ(tensor_edit("model.safetensors", name,
                        [](const Tensor& t) { return t.to(Device::cpu(), DType::bf16); }),
            "[train] checkpoint " + ckpt + ": model.safetensors: \"" + name +
                "\" is bf16, not f32 (masters and moments are kept in f32)");
  EXPECT_EQ(tensor_edit("optimizer.safetensors", name + ".exp_avg",
                        [](const Tensor& t) {
                          return t.reshape({1, t.numel()});
                        }),
            optimizer + name + ".exp_avg\" has shape [1, " + n + "], this run's [" + n + "]");
}

TEST(BadInput, OnlyCheckpointsSprigWroteArePrunedOrReplaced) {
  TempDir dir;
  const std::vector<std::string> every_step = {"checkpoint.every_steps=1",
                                               "checkpoint.keep_last=1"};
  train_sft(testing::tiny_config(dir, with({"train.max_steps=1"}, every_step)), false);
  // A user's folders beside the run's checkpoints, named like them but for a suffix.
  const std::string checkpoints = dir / "run/checkpoints";
  fs::copy(checkpoints + "/step_00000001", checkpoints + "/step_00000001_mybackup");
  for (const char* name : {"step_00000000.bak", "step_1x"}) {
    fs::create_directories(checkpoints + "/" + name);
    testing::write_text(checkpoints + "/" + name + "/notes.txt", "mine");
  }
  const auto users = [&] {
    std::map<std::string, std::string> files;
    for (const char* name : {"step_00000001_mybackup", "step_00000000.bak", "step_1x"})
      files.merge(snapshot(checkpoints + "/" + name));
    return files;
  };
  const auto before = users();
  // Resumed to step 3 with keep_last 1: steps 1 and 2 are pruned, the user's folders stay.
  EXPECT_EQ(train_error(testing::tiny_config(dir, with({"train.max_steps=3"}, every_step)), true),
            "");
  EXPECT_EQ(users(), before);
  EXPECT_TRUE(fs::exists(checkpoints + "/step_00000003"));
  EXPECT_FALSE(fs::exists(checkpoints + "/step_00000001"));
  EXPECT_FALSE(fs::exists(checkpoints + "/step_00000002"));

  // A folder named as the checkpoint of a step to come, which sprig did not write: refused before
  // training, nothing touched.
  fs::create_directories(checkpoints + "/step_00000004");
  testing::write_text(checkpoints + "/step_00000004/notes.txt", "mine");
  const auto all = snapshot(dir / "run");
  EXPECT_EQ(train_error(testing::tiny_config(dir, with({"train.max_steps=5"}, every_step)), true),
            checkpoints +
                "/step_00000004 is named like a checkpoint but is not one sprig wrote (it has no "
                "trainer_state.json): a checkpoint of that step would replace it; move it out "
                "of " +
                checkpoints);
  EXPECT_EQ(snapshot(dir / "run"), all);
}

TEST(BadInput, LatestNamingAPathOutsideTheCheckpointsIsRefused) {
  // Another run's checkpoint exists and would load: `latest` may only name one beside it.
  TempDir dir;
  const std::vector<std::string> base = {"train.max_steps=2"};
  train_sft(testing::tiny_config(dir, with(base, {"run_dir=" + (dir / "other")})), false);
  const TrainConfig config = testing::tiny_config(dir, base);
  train_sft(config, false);
  const std::string checkpoints = config.run_dir + "/checkpoints";
  const TrainConfig longer = testing::tiny_config(dir, {"train.max_steps=4"});
  for (const std::string& name :
       {std::string("../../other/checkpoints/step_00000002"),
        dir / "other/checkpoints/step_00000002", std::string(".."), std::string("")}) {
    testing::write_text(checkpoints + "/latest", name + "\n");
    const auto before = snapshot(config.run_dir);
    EXPECT_EQ(train_error(longer, true), checkpoints + "/latest holds \"" + name +
                                             "\", which is not the name of a checkpoint in " +
                                             checkpoints + " (a step_<N> directory beside it)");
    EXPECT_EQ(snapshot(config.run_dir), before);
  }
}

TEST(BadInput, ARunThatFailsAtItsFirstStepLeavesTheRunDirectoryAsItWas) {
  TempDir dir;
  // Blocks of 48 tokens fit no document of the tiny corpus (10 to 41 tokens): the first step finds
  // nothing to train on, after the target, the draft and the data have loaded.
  const std::vector<std::string> overrides = {"draft.block_size=48"};
  const std::string expected =
      "[train] no micro-batch of a whole epoch (4 batches) had anything to train on";
  const auto first_step_error = [&] {
    try {
      train_draft(testing::tiny_dflash_config(dir, overrides), false);
    } catch (const std::exception& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_EQ(first_step_error(), expected);
  EXPECT_FALSE(fs::exists(dir / "run"));  // no config.resolved.yaml, metrics.jsonl or target/
  // A run directory that was there keeps exactly what it held: an empty one stays empty (no
  // marker, no lock), a sprig one keeps its files.
  fs::create_directories(dir / "run");
  EXPECT_EQ(first_step_error(), expected);
  EXPECT_TRUE(fs::is_empty(dir / "run"));
  testing::write_text(dir / "run/sprig-run.json", "{\"sprig\": \"run directory\"}\n");
  fs::create_directories(dir / "run/notes");
  testing::write_text(dir / "run/notes/plan.txt", "mine");
  const auto before = snapshot(dir / "run");
  EXPECT_EQ(first_step_error(), expected);
  EXPECT_EQ(snapshot(dir / "run"), before);
  std::set<std::string> entries;
  for (const auto& e : fs::directory_iterator(dir / "run")) entries.insert(e.path().string());
  EXPECT_EQ(entries, (std::set<std::string>{dir / "run/notes", dir / "run/sprig-run.json"}));
}

TEST(BadInput, ADirectorySprigDidNotCreateIsNeverARunDirectory) {
  TempDir dir;
  // Someone else's files, among them what a run writes: refused untouched, resuming or not.
  fs::create_directories(dir / "run/target");
  testing::write_text(dir / "run/target/config.json", "{}");
  testing::write_text(dir / "run/metrics.jsonl", "{\"theirs\": 1}\n");
  testing::write_text(dir / "run/config.resolved.yaml", "theirs: 1\n");
  const auto before = snapshot(dir / "run");
  const TrainConfig config = testing::tiny_config(dir, {"train.max_steps=1"});
  const std::string refused =
      "run_dir " + config.run_dir +
      " is not empty and is not a sprig run directory (it holds no sprig-run.json): choose a new "
      "or empty directory, or move its content away";
  EXPECT_EQ(train_error(config), refused);
  EXPECT_EQ(train_error(config, /*resume=*/true), refused);
  EXPECT_EQ(snapshot(dir / "run"), before);
  // Files shaped like a run's (config.resolved.yaml, metrics.jsonl, checkpoints/) are not enough:
  // only the marker makes a directory sprig's.
  fs::remove_all(dir / "run/target");
  testing::write_text(dir / "run/metrics.jsonl", "{\"step\": 1, \"loss\": 2.0}\n");
  fs::create_directories(dir / "run/checkpoints");
  EXPECT_EQ(train_error(config, /*resume=*/true), refused);
  // An empty directory is taken, and marked; the lock ends with the run.
  fs::remove_all(dir / "run");
  fs::create_directories(dir / "run");
  EXPECT_EQ(train_error(config), "");
  EXPECT_TRUE(contains(read_text(config.run_dir + "/sprig-run.json"), "run directory"));
  EXPECT_FALSE(fs::exists(config.run_dir + "/sprig-run.lock"));
}

TEST(BadInput, AStepThatCannotFitIsRefusedWithTheEstimate) {
  TempDir dir;
  const std::string message = train_error(testing::tiny_config(dir, {"data.seq_len=1000000000"}));
  EXPECT_EQ(message.rfind("[train] one training step needs about ", 0), 0u) << message;
  // 2 x 1e9 tokens through 2 layers of the tiny Qwen3 (H 64, I 128, 4 x 16 query and 2 x 16
  // key/value channels), f32: 2 x 2e9 x (4 x 64 + 3 x 64 + 3 x 32 + 3 x 128) x 4 + 2 x 2e9 x 4 x 4
  // + 3 x 2e9 x 64 x 4 bytes = 16.448e12 bytes (15318.4 GiB) of activations.
  EXPECT_TRUE(contains(message, "activations 15318.4, ")) << message;
  EXPECT_TRUE(
      contains(message, "GiB available on cpu: lower data.micro_batch_size or data.seq_len"));
  EXPECT_FALSE(fs::exists(dir / "run"));
}

TEST(MemoryEstimate, CountsEachPartFromTheShapes) {
  StepShapes s;
  s.layers = QwenConfig::load(testing::source_path("train/configs/tiny_qwen3.json"));
  s.tokens = 128;
  s.context_tokens = 10;
  s.frozen_parameters = 1000;
  s.kept_elements = 50;
  s.batch_tokens = 100;
  const MemoryEstimate f32 = estimate_step_memory(s, 1000, DType::f32);
  EXPECT_EQ(f32.masters, 1000 * 4);
  EXPECT_EQ(f32.compute_copy, 0);
  EXPECT_EQ(f32.frozen, 1000 * 4);
  EXPECT_EQ(f32.parameters(), 1000 * 4 + 1000 * 4);
  EXPECT_EQ(f32.gradients, 1000 * 4);
  EXPECT_EQ(f32.optimizer(), 1000 * (4 + 8));
  // 2 layers: 128 x (4 x 64 + 3 x 64 + 3 x 32 + 3 x 128) x 4 + 128 x 4 heads x 4 each; the 10
  // context tokens' projection and norm and each layer's 3 x 32 key and value channels,
  // 10 x (2 x 64 + 2 x 96) x 4; then 3 x 128 x 64 x 4; the frozen model's 50 kept elements apart.
  EXPECT_EQ(f32.activations,
            2 * (128 * 928 * 4 + 128 * 16) + 10 * (2 * 64 + 2 * 96) * 4 + 3 * 128 * 64 * 4);
  EXPECT_EQ(f32.kept, 50 * 4);
  EXPECT_EQ(f32.loss, 128 * 64 * 4 + 128 * 64 * 4);  // 128 rows fit one chunk
  EXPECT_EQ(f32.batches, 3 * 4 * 100 * 8);
  EXPECT_EQ(f32.total(), f32.parameters() + f32.optimizer() + f32.activations + f32.kept +
                             f32.loss + f32.batches);
  const MemoryEstimate bf16 = estimate_step_memory(s, 1000, DType::bf16);
  EXPECT_EQ(bf16.parameters(), 1000 * (4 + 2) + 1000 * 2);
  EXPECT_EQ(bf16.optimizer(), 1000 * (2 + 8));
  EXPECT_EQ(bf16.loss, f32.loss - 128 * 64 * 2);
  // Checkpointing: a checkpointed layer keeps its input (128 x 64 x 4) and its backward rebuilds
  // its whole set while the layers below keep theirs: with every_2 layer 1 keeps its set at the
  // forward's end as layer 0's rebuild does, so the most is one set and one input; with both
  // checkpointed, layer 1's rebuild holds both inputs and one set.
  const double layer = 128 * 928 * 4 + 128 * 16, input = 128 * 64 * 4,
               rest = 10 * (2 * 64 + 2 * 96) * 4 + 3 * 128 * 64 * 4;
  s.checkpoint_every = 2;
  EXPECT_EQ(estimate_step_memory(s, 1000, DType::f32).activations, layer + input + rest);
  s.checkpoint_every = 1;
  EXPECT_EQ(estimate_step_memory(s, 1000, DType::f32).activations, 2 * input + layer + rest);
}

// The warning follows the deepest position a row reaches, not its length: short documents packed
// into rows longer than max_position_embeddings (1024) restart their positions and train
// silently; a document of 1100 tokens reaches position 1099 and is trained with one warning.
TEST(BadInput, RowsPastTheModelsPositionsAreTrainedWithAWarning) {
  TempDir dir;
  ::testing::internal::CaptureStderr();
  TrainSummary summary =
      train_sft(testing::tiny_config(dir, {"data.seq_len=1100", "train.max_steps=1"}), false);
  std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(summary.steps, 1);
  EXPECT_FALSE(contains(err, "max_position_embeddings")) << err;

  TempDir long_dir;
  std::string doc = "{\"input_ids\": [1";
  for (int i = 1; i < 1100; ++i) doc += ", " + std::to_string(3 + i % 50);
  testing::write_text(long_dir / "long.jsonl", doc + "]}\n");
  ::testing::internal::CaptureStderr();
  summary = train_sft(testing::tiny_config(long_dir, {"data.seq_len=1100", "train.max_steps=2",
                                                      "data.train=" + (long_dir / "long.jsonl")}),
                      false);
  err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(summary.steps, 2);
  EXPECT_TRUE(contains(err,
                       "sprig: [train] warning: a training row reaches position 1099, past the "
                       "model's max_position_embeddings 1024 (positions the model was not "
                       "trained on;"))
      << err;
  EXPECT_EQ(err.find("warning"), err.rfind("warning")) << err;  // once per run
}

TEST(BadInput, Bf16OnTheCpuIsRecordedAsTheF32ItRunsIn) {
  TempDir dir;
  const TrainConfig config = testing::tiny_config(dir, {"train.max_steps=1", "model.dtype=bf16"});
  ::testing::internal::CaptureStderr();
  train_sft(config, false);
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_TRUE(
      contains(err, "[train] model.dtype bf16 trains in f32 on the CPU; the run records f32\n"));
  const TrainConfig recorded = load_train_config(config.run_dir + "/config.resolved.yaml", {});
  EXPECT_EQ(recorded.model_dtype, "f32");
  EXPECT_TRUE(contains(read_text(config.run_dir + "/config.resolved.yaml"), "dtype: f32"));
  // f32 asked for, or the default auto (f32 on the CPU): nothing to say, f32 recorded.
  for (const std::string dtype : {"f32", "auto"}) {
    TempDir quiet;
    ::testing::internal::CaptureStderr();
    const TrainConfig c =
        testing::tiny_config(quiet, {"train.max_steps=1", "model.dtype=" + dtype});
    train_sft(c, false);
    EXPECT_FALSE(contains(::testing::internal::GetCapturedStderr(), "model.dtype")) << dtype;
    EXPECT_EQ(load_train_config(c.run_dir + "/config.resolved.yaml", {}).model_dtype, "f32");
  }
}

TEST(BadInput, StartingOverAnExistingRunIsRefusedUntouched) {
  TempDir dir;
  const TrainConfig config = testing::tiny_config(dir, {"train.max_steps=1"});
  train_sft(config, false);
  const auto before = snapshot(config.run_dir);
  const TrainConfig other = testing::tiny_config(dir, {"train.max_steps=3", "seed=9"});
  EXPECT_EQ(train_error(other), config.run_dir +
                                    " already holds checkpoints: pass --resume to continue the "
                                    "run, or choose another run_dir");
  EXPECT_EQ(snapshot(config.run_dir), before);  // config.resolved.yaml and metrics included
}

}  // namespace
}  // namespace sprig
