// `sprig bench` refuses before any work: a size of zero or less and an option the chosen mode
// ignores are usage errors (exit 2), and shapes the machine cannot hold are refused with the
// options and the bytes they would take (exit 1), before anything is printed.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "tests/cli_run.h"
#include "tests/nn/checkpoint_fixtures.h"

namespace sprig {
namespace {

using testing::CliRun;
using testing::run_sprig;
using Cases = std::vector<std::pair<std::string, std::string>>;  // sprig bench ARGS, the message

// Each case fails with exit 2 and one line on stderr, its message and the pointer to --help.
void expect_usage_errors(const Cases& cases, const std::string& dir) {
  for (const auto& [args, message] : cases) {
    const CliRun r = run_sprig("bench " + args, dir);
    const std::string command = args.substr(0, args.find(' '));
    EXPECT_EQ(r.exit_code, 2) << args;
    EXPECT_EQ(r.err, "sprig: " + message + " (see sprig bench " + command + " --help)\n") << args;
    EXPECT_EQ(r.out, "") << args;
  }
}

TEST(BenchCli, SizesOfZeroOrLessAreUsageErrors) {
  const testing::NamedTempDir tmp("bench_sizes");
  expect_usage_errors(
      {
          {"data --seq-len 0", "[bench data] --seq-len: must be a positive number, got 0"},
          {"attention --device cpu --heads 0",
           "[bench attention] --heads: must be a positive number, got 0"},
          {"gru --device cpu --rows -1", "[bench gru] --rows: must be a positive number, got -1"},
          {"draft --device cpu --rows 0", "[bench draft] --rows: must be a positive number, got 0"},
          {"step --device cpu --completions 0",
           "[bench step] --completions: must be a positive number, got 0"},
          {"step --device cpu --prompt -5",
           "[bench step] --prompt: must be a positive number, got -5"},
          {"step --device cpu --completion 1",
           "[bench step] --completion: must be at least 2, got 1"},
          {"step --device cpu --reps -1", "[bench step] --reps: must be a positive number, got -1"},
      },
      tmp.path);
}

TEST(BenchCli, OptionsTheModeIgnoresAreUsageErrors) {
  const testing::NamedTempDir tmp("bench_ignored");
  expect_usage_errors(
      {
          {"data --quick --tokens 5000000",
           "[bench data] --tokens 5000000 applies without --quick, whose smoke run packs 1048576 "
           "tokens per packer"},
          {"attention --device cpu --backend cudnn",
           "[bench attention] --backend cudnn applies to CUDA devices; on cpu only sprig's kernels "
           "run"},
          {"attention --device cpu --mask dflash --seq 512",
           "[bench attention] --seq 512 applies to the causal and documents masks, not --mask "
           "dflash"},
          {"draft --device cpu --section anchors --anchors-per-doc 4",
           "[bench draft] --anchors-per-doc 4 applies to the packing section, not --section "
           "anchors"},
          {"step --device cpu --clip-eps 0.2",
           "[bench step] --clip-eps applies to --loss pg, not --loss sft"},
      },
      tmp.path);
}

// The estimates (tools/bench/*.cpp) by hand, for the tiny target of tools/bench/models.h where one
// is run; what the machine has left varies, so the message is checked up to it and from its end.
TEST(BenchCli, ShapesTheMachineCannotHoldAreRefusedBeforeAnyWork) {
  const testing::NamedTempDir tmp("bench_memory");
  const Cases cases = {
      // 28 bytes per token, memcpy's 64 MiB source, its destination and a batch of 8 x 4096.
      {"data --tokens 1000000000000",
       "[bench data] --tokens 1000000000000 --seq-len 4096 --batch 8 would take 26077.1 GiB"},
      // q, k, v and the rest: 9 x 1e8 x 4 x 64 f32; log-sum-exps; half of 1562500^2 tiles.
      {"attention --device cpu --mask causal --seq 100000000",
       "[bench attention] the causal case (B x Tq x Tk = 1 x 100000000 x 100000000, --heads 4 "
       "--kv-heads 4 --head-dim 64) would take 28146.1 GiB"},
      // 1.6e9 rows of 3E + 16G f32 values.
      {"gru --device cpu --rows 100000000",
       "[bench gru] --rows 100000000 --steps 16 --input 1024 --hidden 1024 in f32 would take "
       "115966.9 GiB"},
      // train/memory.h's step at 1e8 rows of 1024 tokens, 256 anchors of 16 slots per row, and
      // the eagle3 section's target with Qwen3's vocabulary (0.7 GiB).
      {"draft --device cpu --rows 100000000",
       "[bench draft] --target tiny --rows 100000000 --seq 1024 --anchors-per-doc 16 "
       "--draft-layers 1 --block-size 16 would take 11782837.8 GiB"},
      // train/memory.h's step at the naive layout's 8 x (1e12 + 64) tokens.
      {"step --device cpu --prompt 1000000000000",
       "[bench step] --model tiny --completions 8 --prompt 1000000000000 --completion 64 would "
       "take 565767288.4 GiB"},
  };
  for (const auto& [args, message] : cases) {
    const CliRun r = run_sprig("bench " + args, tmp.path);
    const std::string start = "sprig: " + message + ", more than the ",
                      end = " GiB available on cpu\n";
    EXPECT_EQ(r.exit_code, 1) << args;
    EXPECT_EQ(r.err.substr(0, start.size()), start) << args;
    EXPECT_TRUE(r.err.size() > start.size() + end.size() &&
                r.err.substr(r.err.size() - end.size()) == end)
        << args << ": " << r.err;
    EXPECT_EQ(r.out, "") << args;
  }
}

}  // namespace
}  // namespace sprig
