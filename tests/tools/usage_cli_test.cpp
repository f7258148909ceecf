// How every command meets its command line: a usage error is one `sprig: [command] ...` line with
// exit 2, an unknown command lists the known ones, `--version` names the version and the commit,
// training overrides take `--a.b=value` or `--a.b value` and their errors name the command line,
// a config's paths are relative to its file, wherever the command runs, a run directory stands
// for its latest checkpoint, and every command that runs a model defaults to --device auto.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tests/cli_run.h"
#include "tests/nn/checkpoint_fixtures.h"

namespace sprig {
namespace {

using testing::CliRun;
using testing::run_sprig;
namespace fs = std::filesystem;

int64_t lines(const std::string& text) { return std::count(text.begin(), text.end(), '\n'); }

// sprig plan reads the models' config.json only (the tiny configs' targets are fresh ones) and
// prints one rank's estimate, itemised.
TEST(UsageCli, PlanItemisesAStepFromTheConfigAlone) {
  const testing::NamedTempDir tmp("plan");
  CliRun r = run_sprig("plan -c " + testing::source_dir() +
                           "/train/configs/tiny_dflash.yaml --recipe dflash --gpus 2 --gpu h100",
                       tmp.path);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* part :
       {"sprig plan: a dflash draft (", "2 x h100 (79.65 GiB each)", "  frozen target ",
        "  target states ", ": fits (0%)", "data parallel: each of the 2 ranks holds all of this"})
    EXPECT_NE(r.out.find(part), std::string::npos) << part << "\n" << r.out;
  r = run_sprig("plan -c " + testing::source_dir() +
                    "/train/configs/tiny_sft.yaml --gpu 0.06 --data.seq_len=8192",
                tmp.path);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find(": does not fit\nthe smallest change that fits: "
                       "--train.activation_checkpointing=layers --data.micro_batch_size=2\n"),
            std::string::npos)
      << r.out;
}

// docs/what-fits.md ends with the table tools/plan_table.sh makes with this sprig: a change to the
// estimate that does not regenerate it fails here.
TEST(UsageCli, WhatFitsIsWhatPlanSays) {
  const testing::NamedTempDir tmp("what_fits");
  const std::string out = tmp.path + "/table.md";
  testing::ChildProcess script = testing::ChildProcess::shell(
      "exec bash tools/plan_table.sh " SPRIG_BIN " >" + out, testing::source_dir());
  ASSERT_EQ(script.wait_for(testing::kCommandLimit), std::optional<int>(0));
  const std::string table = testing::file_text(out),
                    doc = testing::file_text(testing::source_dir() + "/docs/what-fits.md");
  ASSERT_GT(table.size(), 1000u);
  EXPECT_TRUE(doc.size() >= table.size() && doc.substr(doc.size() - table.size()) == table)
      << "docs/what-fits.md is out of date: regenerate its table with tools/plan_table.sh\n"
      << table;
}

TEST(UsageCli, UsageErrorsAreOneLineNamingTheCommandWithExit2) {
  const testing::NamedTempDir tmp("usage_errors");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"score", "sprig: [score] --model is required (see sprig score --help)\n"},
      {"train sft", "sprig: [train sft] --config is required (see sprig train sft --help)\n"},
      {"convert --out x",
       "sprig: [convert] give exactly one of --from-hf or --to-hf (see sprig "
       "convert --help)\n"},
      {"trian",
       "sprig: [sprig] unknown command 'trian': one of bench, data, demo, eval, mask, "
       "convert, score, generate, plan, plot, spec-eval, train (see sprig --help)\n"},
      {"plan -c x.yaml --gpu h300",
       "sprig: [plan] --gpu must be h200, h100, a100-80 or a number of GiB, got 'h300' (see "
       "sprig plan --help)\n"},
      {"plan -c x.yaml --recipe frob",
       "sprig: [plan] --recipe must be sft, dflash, domino, jetspec or eagle3, got 'frob' (see "
       "sprig plan --help)\n"},
      {"train frob",
       "sprig: [train] unknown command 'frob': one of sft, dflash, domino, jetspec, eagle3 "
       "(see sprig train --help)\n"},
      {"", "sprig: [sprig] A subcommand is required (see sprig --help)\n"},
  };
  for (const auto& [args, message] : cases) {
    const CliRun r = run_sprig(args, tmp.path);
    EXPECT_EQ(r.exit_code, 2) << args;
    EXPECT_EQ(r.err, message) << args;
    EXPECT_EQ(r.out, "") << args;
  }
  // --help still prints the help and succeeds.
  const CliRun help = run_sprig("train sft --help", tmp.path);
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.out.find("--section.key=value"), std::string::npos) << help.out;
}

// One default device for every command that runs a model: auto (CUDA when present).
TEST(UsageCli, EveryCommandsDeviceDefaultsToAuto) {
  const testing::NamedTempDir tmp("device_default");
  for (const std::string command :
       {"eval dflash", "eval domino", "eval jetspec", "score", "generate", "spec-eval", "demo",
        "bench ops", "bench attention", "bench gru", "bench draft", "bench step"}) {
    const CliRun help = run_sprig(command + " --help", tmp.path);
    EXPECT_EQ(help.exit_code, 0) << command;
    const size_t option = help.out.find("--device");
    ASSERT_NE(option, std::string::npos) << command << ": " << help.out;
    const std::string line = help.out.substr(option, help.out.find('\n', option) - option);
    EXPECT_NE(line.find("=auto"), std::string::npos) << command << ": " << line;
  }
}

TEST(UsageCli, VersionNamesTheVersionAndTheCommit) {
  const testing::NamedTempDir tmp("usage_version");
  const CliRun r = run_sprig("--version", tmp.path);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string first = r.out.substr(0, r.out.find('\n'));
  EXPECT_EQ(first.rfind("sprig 0.1.0 (commit ", 0), 0u) << first;
  // A commit: twelve hex digits (and -dirty for a changed tree), or unknown outside git.
  const std::string commit = first.substr(20, first.size() - 21);
  const std::string hash = commit.substr(0, commit.find('-'));
  EXPECT_TRUE(
      commit == "unknown" ||
      (hash.size() == 12 && hash.find_first_not_of("0123456789abcdef") == std::string::npos))
      << first;
}

// The tiny SFT config, run from a directory that is not the repository: its relative paths (the
// model config, the data, the run directory) are the file's; a space-separated override works;
// the resolved config records absolute paths; an override's error names the command line.
TEST(UsageCli, ConfigPathsAreTheFilesAndOverridesTakeASpace) {
  const testing::NamedTempDir tmp("usage_paths");
  const std::string source = testing::source_dir();
  const std::string config_dir = tmp.path + "/repo/train/configs";
  fs::create_directories(config_dir);
  for (const char* file : {"tiny_sft.yaml", "tiny_qwen3.json", "tiny_docs.jsonl"})
    fs::copy_file(source + "/train/configs/" + file, config_dir + "/" + file);
  const std::string elsewhere = tmp.path + "/elsewhere";
  fs::create_directories(elsewhere);
  const CliRun r = run_sprig(
      "train sft -c " + config_dir + "/tiny_sft.yaml --train.max_steps 4 --log.every_steps=2",
      tmp.path, elsewhere);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // run_dir ../../runs/tiny_sft: the repository's runs/ as the file sees it.
  const std::string run = tmp.path + "/repo/runs/tiny_sft";
  ASSERT_TRUE(fs::exists(run + "/metrics.jsonl")) << r.out;
  const std::string resolved = testing::read_text(run + "/config.resolved.yaml");
  EXPECT_NE(resolved.find("config: " + config_dir + "/tiny_qwen3.json"), std::string::npos)
      << resolved;
  EXPECT_NE(resolved.find("train: " + config_dir + "/tiny_docs.jsonl"), std::string::npos)
      << resolved;
  EXPECT_NE(resolved.find("max_steps: 4"), std::string::npos) << resolved;
  // The done line's loss is the last one logged: the mean of steps 3 and 4, not step 4's own.
  const auto last_record = [&] {
    const std::string metrics = testing::read_text(run + "/metrics.jsonl");
    return nlohmann::json::parse(metrics.substr(metrics.rfind('\n', metrics.size() - 2) + 1));
  };
  std::ostringstream loss;
  loss << last_record()["loss"].get<double>();
  EXPECT_NE(r.out.find("done: 4 steps, last loss " + loss.str() + ";"), std::string::npos) << r.out;
  // Resumed from a third directory, the config's paths still resolve against the file.
  const CliRun resumed = run_sprig("train sft -c " + config_dir +
                                       "/tiny_sft.yaml --train.max_steps 6 --log.every_steps=2 "
                                       "--resume",
                                   tmp.path, tmp.path + "/repo");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  EXPECT_NE(resumed.out.find("done: 6 steps, last loss "), std::string::npos) << resumed.out;
  EXPECT_EQ(last_record()["step"], 6);
  // The run directory stands for its newest checkpoint wherever a model is read.
  const CliRun exported =
      run_sprig("convert --to-hf " + run + " --out " + tmp.path + "/hf", tmp.path, elsewhere);
  ASSERT_EQ(exported.exit_code, 0) << exported.err;
  EXPECT_EQ(exported.out.rfind(
                "wrote " + tmp.path + "/hf from " + run + "/checkpoints/step_00000006: ", 0),
            0u)
      << exported.out;
  const std::string checkpoint = run + "/checkpoints/step_00000006";
  const std::vector<std::string> commands = {
      "generate --device cpu --prompt-ids 3,1,4 --max-new-tokens 4",
      "score --device cpu --logprobs --input " + config_dir + "/tiny_docs.jsonl --out " + tmp.path +
          "/s.safetensors"};
  for (const std::string& command : commands) {
    const CliRun by_run = run_sprig(command + " --model " + run, tmp.path, elsewhere);
    ASSERT_EQ(by_run.exit_code, 0) << command << ": " << by_run.err;
    fs::remove(tmp.path + "/s.safetensors");
    const CliRun by_checkpoint = run_sprig(command + " --model " + checkpoint, tmp.path, elsewhere);
    ASSERT_EQ(by_checkpoint.exit_code, 0) << command << ": " << by_checkpoint.err;
    fs::remove(tmp.path + "/s.safetensors");
    EXPECT_EQ(by_run.out, by_checkpoint.out) << command;
    EXPECT_FALSE(by_run.out.empty()) << command;
  }

  const CliRun bad = run_sprig("train sft -c " + config_dir + "/tiny_sft.yaml --train.max_step 2",
                               tmp.path, elsewhere);
  EXPECT_EQ(bad.exit_code, 2);  // the command line is wrong: a usage error
  EXPECT_EQ(bad.err,
            "sprig: [train sft] unknown key train.max_step (did you mean train.max_steps?) (from "
            "the command line: --train.max_step=2) (see sprig train sft --help)\n");
  const CliRun dangling =
      run_sprig("train sft -c " + config_dir + "/tiny_sft.yaml --train.max_steps", tmp.path);
  EXPECT_EQ(dangling.exit_code, 2);
  EXPECT_EQ(dangling.err,
            "sprig: [train sft] override --train.max_steps has no value (--train.max_steps=value "
            "or --train.max_steps value) (see sprig train sft --help)\n");
  EXPECT_EQ(lines(dangling.err), 1);
  // An empty value is no value either (YAML would read it as null: the default, silently).
  for (const char* empty : {"--train.max_steps=", "--train.max_steps ''"}) {
    const CliRun r = run_sprig("train sft -c " + config_dir + "/tiny_sft.yaml " + empty, tmp.path);
    EXPECT_EQ(r.exit_code, 2) << empty;
    EXPECT_EQ(r.err,
              "sprig: [train sft] override --train.max_steps= has no value "
              "(--train.max_steps=value; null for none) (see sprig train sft --help)\n")
        << empty;
  }
}

}  // namespace
}  // namespace sprig
