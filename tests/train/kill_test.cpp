// A real `sprig train sft` process killed (SIGKILL) at many moments, several of them while a
// checkpoint is being written, resumes from its last complete checkpoint and ends with weights
// and metrics bit-identical to an uninterrupted run. SIGTERM and SIGINT stop it at a step
// boundary with a checkpoint there, the command that continues it and exit status 128 + signal;
// a second signal ends it at once. Also: a corrupt checkpoint ends the process with one sentence
// on stderr and a non-zero exit status.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <iostream>
#include <nlohmann/json.hpp>
#include <thread>

#include "tensor/random.h"
#include "tests/child_process.h"
#include "tests/train/train_test_util.h"
#include "train/run_directory.h"
#include "train/sft.h"

namespace sprig {
namespace {

using testing::ChildProcess;
using testing::TempDir;
namespace fs = std::filesystem;

// Starts `sprig args...` with stdout and stderr appended to `log`.
ChildProcess spawn(const std::vector<std::string>& args, const std::string& log) {
  std::vector<std::string> argv = {SPRIG_BIN};
  argv.insert(argv.end(), args.begin(), args.end());
  return ChildProcess(argv, log);
}

// Waits for `child`, at most five minutes; returns its exit status, or -signal when a signal
// ended it (past the limit: a failure, and 124).
int wait_for(ChildProcess& child) {
  const std::optional<int> status = child.wait_for(std::chrono::minutes(5));
  if (!status) ADD_FAILURE() << "a sprig run did not end within 5 minutes";
  return status.value_or(124);
}
int wait_for(ChildProcess&& child) { return wait_for(child); }

// Whether a checkpoint save started at or after `since` is in progress (or was cut short): its
// temporary directory exists. Leftovers of earlier killed saves are older.
bool saving_since(const std::string& checkpoints, fs::file_time_type since) {
  std::error_code ec;
  for (fs::directory_iterator it(checkpoints, ec), end; !ec && it != end; it.increment(ec))
    if (it->path().filename().string().rfind(".tmp-step_", 0) == 0 &&
        fs::last_write_time(it->path(), ec) >= since)
      return true;
  return false;
}

// The checkpoint `latest` names ("" before the first one).
std::string latest_name(const std::string& checkpoints) {
  std::string name;
  std::ifstream(checkpoints + "/latest") >> name;
  return name;
}

// Waits until ready() holds, then `delay` more, then kills `run` (SIGKILL). Returns -SIGKILL, or
// the exit status when the process ended first.
template <class F> int kill_when(ChildProcess& run, F ready, std::chrono::microseconds delay) {
  int status = 0;
  while (!ready()) {
    if (run.exited(status)) return status;
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  std::this_thread::sleep_for(delay);
  run.signal(SIGKILL);
  return wait_for(run);
}

std::vector<std::pair<int64_t, double>> logged_losses(const std::string& run_dir) {
  std::vector<std::pair<int64_t, double>> out;
  std::ifstream in(run_dir + "/metrics.jsonl");
  for (std::string line; std::getline(in, line);) {
    const auto rec = nlohmann::json::parse(line);
    out.emplace_back(rec.at("step").get<int64_t>(), rec.at("loss").get<double>());
  }
  return out;
}

TEST(Kill, KilledRunResumesToTheUninterruptedResult) {
  TempDir dir;
  const std::string config_path = testing::write_tiny_config(dir);
  const std::vector<std::string> overrides = {"train.max_steps=12", "checkpoint.every_steps=1",
                                              "checkpoint.keep_last=2", "log.every_steps=1"};
  std::vector<std::string> reference_overrides = overrides;
  reference_overrides.push_back("run_dir=" + (dir / "reference"));
  const TrainConfig reference = load_train_config(config_path, reference_overrides);
  train_sft(reference, false);

  const std::string run_dir = dir / "run", checkpoints = run_dir + "/checkpoints",
                    log = dir / "sprig.log";
  const auto sprig_args = [&](bool resume) {
    std::vector<std::string> args = {"train", "sft", "-c", config_path};
    for (const std::string& o : overrides) args.push_back("--" + o);
    if (resume) args.push_back("--resume");
    return args;
  };
  // Alternately killed in the middle of a checkpoint save, and at a random moment (0 to 5 ms)
  // after a checkpoint completed. Kills follow the run's progress, not the clock, so any machine
  // speed gives the same story.
  Generator gen(7);
  int kills = 0, kills_during_save = 0;
  for (int round = 0; round < 8; ++round) {
    const fs::file_time_type start = fs::file_time_type::clock::now();
    const std::string latest_at_start = latest_name(checkpoints);
    ChildProcess run = spawn(sprig_args(round > 0), log);
    const bool during_save = round % 2 == 0;
    const int status = during_save
                           ? kill_when(
                                 run, [&] { return saving_since(checkpoints, start); },
                                 std::chrono::microseconds(0))
                           : kill_when(
                                 run, [&] { return latest_name(checkpoints) != latest_at_start; },
                                 std::chrono::microseconds(gen.next_int(0, 5000)));
    if (status != -SIGKILL) {  // it finished first
      ASSERT_EQ(status, 0) << testing::read_text(log);
      break;
    }
    ++kills;
    kills_during_save += during_save && saving_since(checkpoints, start);
  }
  // Finishes the run (nothing left to do when it already finished).
  ASSERT_EQ(wait_for(spawn(sprig_args(true), log)), 0) << testing::read_text(log);

  std::cout << kills << " kills, " << kills_during_save << " of them inside a checkpoint save\n";
  EXPECT_GE(kills, 4);
  EXPECT_GE(kills_during_save, 2) << "too few kills landed inside a checkpoint save";
  EXPECT_TRUE(testing::contains(testing::read_text(log), "resumed from "));
  EXPECT_FALSE(saving_since(checkpoints, fs::file_time_type::min()));  // leftovers replaced
  testing::expect_bit_identical(testing::latest_weights(run_dir),
                                testing::latest_weights(reference.run_dir));
  EXPECT_EQ(logged_losses(run_dir), logged_losses(reference.run_dir));
}

// The steps metrics.jsonl has logged so far.
size_t logged_steps(const std::string& run_dir) {
  std::ifstream in(run_dir + "/metrics.jsonl");
  size_t lines = 0;
  for (std::string line; std::getline(in, line);) lines += !line.empty();
  return lines;
}

class StopSignal : public ::testing::TestWithParam<int> {};

// Two runs in one run directory: while the first holds it, the second is refused with the first's
// pid and host, and changes nothing; the lock dies with its holder, even a killed one.
TEST(Kill, ASecondRunInTheSameDirectoryIsRefusedWhileTheFirstHoldsIt) {
  TempDir dir;
  const std::string config_path = testing::write_tiny_config(dir);
  const std::string run_dir = dir / "run", first_log = dir / "first.log",
                    second_log = dir / "second.log";
  const auto args = [&](const std::string& steps) {
    return std::vector<std::string>{"train", "sft", "-c", config_path,
                                    "--train.max_steps=" + steps};
  };
  ChildProcess first = spawn(args("1000000"), first_log);
  int status = 0;
  const std::string holder = "\"pid\":" + std::to_string(first.pid());
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (testing::read_text(run_dir + "/sprig-run.lock").find(holder) == std::string::npos) {
    ASSERT_FALSE(first.exited(status)) << testing::read_text(first_log);
    ASSERT_LT(std::chrono::steady_clock::now(), deadline)
        << "the first run took no lock: " << testing::read_text(first_log);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(wait_for(spawn(args("1"), second_log)), 1);
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  EXPECT_EQ(testing::read_text(second_log),
            "sprig: run_dir " + run_dir + " is in use by another sprig run (pid " +
                std::to_string(first.pid()) + " on host " + host +
                "): wait for it to end, or choose another run_dir\n");
  EXPECT_NE(testing::read_text(run_dir + "/sprig-run.lock").find(holder), std::string::npos);
  first.signal(SIGKILL);
  EXPECT_EQ(wait_for(first), -SIGKILL);
  EXPECT_NO_THROW(RunDirectory{run_dir});
}

TEST_P(StopSignal, StopsAtAStepBoundaryWithACheckpointAndTheResumeCommand) {
  const int sig = GetParam();
  TempDir dir;
  const std::string config_path = testing::write_tiny_config(dir);
  const std::vector<std::string> overrides = {"train.max_steps=60", "log.every_steps=1",
                                              "checkpoint.keep_last=1"};
  std::vector<std::string> reference_overrides = overrides;
  reference_overrides.push_back("run_dir=" + (dir / "reference"));
  train_sft(load_train_config(config_path, reference_overrides), false);

  const std::string run_dir = dir / "run", log = dir / "sprig.log";
  std::vector<std::string> args = {"train", "sft", "-c", config_path};
  for (const std::string& o : overrides) args.push_back("--" + o);
  ChildProcess run = spawn(args, log);
  int status = 0;
  while (logged_steps(run_dir) < 2) {  // a step logged: the loop runs
    ASSERT_FALSE(run.exited(status)) << testing::read_text(log);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  run.signal(sig);
  ASSERT_EQ(wait_for(run), 128 + sig) << testing::read_text(log);

  // The checkpoint of the step it stopped after, named in the message with the command that
  // continues the run.
  const std::string stopped_at = latest_name(run_dir + "/checkpoints");
  ASSERT_FALSE(stopped_at.empty());
  const int64_t step = std::stoll(stopped_at.substr(5));
  EXPECT_GE(step, 2);
  EXPECT_LT(step, 60) << "the run finished before the signal arrived";
  EXPECT_EQ(static_cast<int64_t>(logged_steps(run_dir)), step);
  const std::string resume_command = "sprig train sft -c " + config_path +
                                     " --train.max_steps=60 --log.every_steps=1 "
                                     "--checkpoint.keep_last=1 --resume";
  EXPECT_TRUE(testing::contains(
      testing::read_text(log),
      std::string("sprig: stopped by ") + (sig == SIGINT ? "SIGINT" : "SIGTERM") + " after step " +
          std::to_string(step) + "; checkpoint " + run_dir + "/checkpoints/" + stopped_at +
          "; continue with: " + resume_command + "\n"));

  // That command finishes the run as if it had not stopped.
  std::vector<std::string> resume_args = args;
  resume_args.push_back("--resume");
  ASSERT_EQ(wait_for(spawn(resume_args, log)), 0) << testing::read_text(log);
  testing::expect_bit_identical(testing::latest_weights(run_dir),
                                testing::latest_weights(dir / "reference"));
  EXPECT_EQ(logged_losses(run_dir), logged_losses(dir / "reference"));
}

INSTANTIATE_TEST_SUITE_P(Train, StopSignal, ::testing::Values(SIGTERM, SIGINT),
                         [](const auto& info) {
                           return std::string(info.param == SIGINT ? "SIGINT" : "SIGTERM");
                         });

TEST(StopSignalInProcess, HandlersAreRestoredAndASecondSignalEndsTheProcessAtOnce) {
  TempDir dir;
  const TrainConfig config = testing::tiny_config(dir, {"train.max_steps=6"});
  // One signal during step 2: the run stops after it, saving it, and the handlers it installed
  // are gone again.
  const TrainSummary summary = train_sft(config, false, [](int64_t step, double) {
    if (step == 2) ::raise(SIGTERM);
  });
  EXPECT_EQ(summary.stopped_by_signal, SIGTERM);
  EXPECT_EQ(summary.steps, 2);
  EXPECT_EQ(summary.checkpoint, config.run_dir + "/checkpoints/step_00000002");
  struct sigaction now {};
  ::sigaction(SIGTERM, nullptr, &now);
  EXPECT_EQ(now.sa_handler, SIG_DFL);
  ::sigaction(SIGINT, nullptr, &now);
  EXPECT_EQ(now.sa_handler, SIG_DFL);
  // Two signals: the second ends the process by its default action, without a checkpoint. (The
  // death test re-executes the binary: a child forked from a process with OpenMP threads hangs.)
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  TempDir twice;
  const TrainConfig twice_config = testing::tiny_config(twice, {"train.max_steps=6"});
  EXPECT_EXIT(train_sft(twice_config, false,
                        [](int64_t step, double) {
                          if (step == 2) {
                            ::raise(SIGINT);
                            ::raise(SIGINT);
                          }
                        }),
              ::testing::KilledBySignal(SIGINT), "");
  EXPECT_FALSE(fs::exists(twice_config.run_dir + "/checkpoints/latest"));
}

TEST(Kill, CorruptCheckpointEndsTheProcessWithOneSentence) {
  TempDir dir;
  const std::string config_path = testing::write_tiny_config(dir);
  const std::string log = dir / "sprig.log";
  ASSERT_EQ(wait_for(spawn({"train", "sft", "-c", config_path, "--train.max_steps=1"}, log)), 0);
  const std::string model = dir / "run/checkpoints/step_00000001/model.safetensors";
  fs::resize_file(model, 64);
  const std::string before = testing::read_text(model);
  fs::remove(log);
  EXPECT_EQ(
      wait_for(spawn({"train", "sft", "-c", config_path, "--train.max_steps=2", "--resume"}, log)),
      1);
  const std::string output = testing::read_text(log);
  EXPECT_EQ(
      output.rfind("sprig: checkpoint " + (dir / "run/checkpoints/step_00000001") + " is corrupt: ",
                   0),
      0u)
      << output;
  EXPECT_EQ(std::count(output.begin(), output.end(), '\n'), 1) << output;
  EXPECT_EQ(testing::read_text(model), before);
}

}  // namespace
}  // namespace sprig
