// Numbers on the command line and in the files commands read: every integer option is read by one
// rule (base 10, the whole string, within its C++ type; anything else a usage error naming the
// option and the value as given), decodings and sizes past int64 are refused with their true
// values, and a metrics value that is not a number is an error rather than a missing point.
#include <gtest/gtest.h>

#include <filesystem>
#include <tuple>

#include "tests/cli_run.h"
#include "tests/nn/checkpoint_fixtures.h"

namespace sprig {
namespace {

using testing::CliRun;
using testing::kGoldenDir;
using testing::run_sprig;
using testing::write_text;

const std::string kNotBase10 = ": must be a base-10 integer (no leading zero or '+'), got ";
const std::string kInt64 =
    ": must be an integer in [-9223372036854775808, 9223372036854775807], got ";
const std::string kUint64 = ": must be an integer in [0, 18446744073709551615], got ";

TEST(NumbersCli, IntegerOptionsAreBase10WithinTheirType) {
  const testing::NamedTempDir tmp("numbers_integers");
  write_text(tmp.path + "/docs.jsonl", "{\"input_ids\": [1, 2]}\n");
  const std::string generate = "generate --model absent --prompt-ids 1 ";
  const std::string pack =
      "data pack --input " + tmp.path + "/docs.jsonl --mode sft --out " + tmp.path + "/rows.jsonl ";
  const std::string tokenize = "data tokenize --tokenizer " + tmp.path + " --input " + tmp.path +
                               "/docs.jsonl --out " + tmp.path + "/tokens.jsonl ";
  const std::string models = " --target absent --draft absent --input absent ";
  // {arguments, command, message}
  const std::vector<std::tuple<std::string, std::string, std::string>> cases = {
      {generate + "--max-new-tokens 010", "generate", "--max-new-tokens" + kNotBase10 + "010"},
      {generate + "--max-new-tokens 0x3", "generate", "--max-new-tokens" + kNotBase10 + "0x3"},
      {generate + "--max-new-tokens +3", "generate", "--max-new-tokens" + kNotBase10 + "+3"},
      {generate + "--max-new-tokens 1e20", "generate", "--max-new-tokens" + kNotBase10 + "1e20"},
      {generate + "--stop-id 18446744073709551615", "generate",
       "--stop-id" + kInt64 + "18446744073709551615"},
      {pack + "--seq-len 18446744073709551615", "data pack",
       "--seq-len" + kInt64 + "18446744073709551615"},
      {tokenize + "--threads 4294967297", "data tokenize",
       "--threads: must be an integer in [-2147483648, 2147483647], got 4294967297"},
      {"eval dflash" + models + "--seed -1", "eval dflash", "--seed" + kUint64 + "-1"},
      {"spec-eval" + models + "--seed 18446744073709551616", "spec-eval",
       "--seed" + kUint64 + "18446744073709551616"},
  };
  for (const auto& [args, command, message] : cases) {
    const CliRun r = run_sprig(args, tmp.path);
    EXPECT_EQ(r.exit_code, 2) << args;
    EXPECT_EQ(r.err,
              "sprig: [" + command + "] " + message + " (see sprig " + command + " --help)\n")
        << args;
    EXPECT_EQ(r.out, "") << args;
  }
  // The largest seed is one: the command goes on to its input.
  const CliRun largest =
      run_sprig("eval dflash" + models + "--seed 18446744073709551615", tmp.path);
  EXPECT_EQ(largest.exit_code, 1);
  EXPECT_EQ(largest.err, "sprig: absent: cannot open the input file\n");
}

TEST(NumbersCli, DecodingPastInt64IsRefusedWithItsTrueLength) {
  const testing::NamedTempDir tmp("numbers_decoding");
  const std::string generate = "generate --device cpu --strict-positions --model " + kGoldenDir +
                               "qwen3_tiny --max-new-tokens ";
  const CliRun past = run_sprig(generate + "9223372036854775807 --prompt-ids 1,2,3", tmp.path);
  EXPECT_EQ(past.exit_code, 1);
  EXPECT_EQ(past.err,
            "sprig: [generate] decoding a 3-token prompt with --max-new-tokens 9223372036854775807 "
            "makes 9223372036854775810 tokens, past the largest int64 9223372036854775807\n");
  EXPECT_EQ(past.out, "");
  // One token fewer than int64 counts: the positions rule refuses it by its last position.
  const CliRun last = run_sprig(generate + "9223372036854775806 --prompt-ids 1", tmp.path);
  EXPECT_EQ(last.exit_code, 1);
  EXPECT_EQ(last.err,
            "sprig: [generate] decoding a 1-token prompt with --max-new-tokens 9223372036854775806 "
            "reaches position 9223372036854775806, past the model's max_position_embeddings 128 "
            "(--strict-positions)\n");
  // spec-eval's prompts: 2 + (2^63 - 2) tokens are one too many.
  const std::string input = tmp.path + "/prompts.jsonl";
  write_text(input, "{\"prompt_ids\": [3, 14]}\n");
  const CliRun spec = run_sprig("spec-eval --device cpu --target " + kGoldenDir +
                                    "qwen3_tiny --draft " + kGoldenDir + "dflash_tiny --input " +
                                    input + " --max-new-tokens 9223372036854775806",
                                tmp.path);
  EXPECT_EQ(spec.exit_code, 1);
  EXPECT_EQ(spec.err, "sprig: [spec-eval] " + input +
                          ":1: decoding a 2-token prompt with --max-new-tokens "
                          "9223372036854775806 makes 9223372036854775808 tokens, past the largest "
                          "int64 9223372036854775807\n");
}

TEST(NumbersCli, SizesArePrintedAsTheyAre) {
  const testing::NamedTempDir tmp("numbers_sizes");
  // 2^62 x 2^62 bytes are 2^104 MiB.
  write_text(tmp.path + "/mask.json", "{\"kind\": \"causal\", \"length\": 4611686018427387904}");
  const CliRun mask = run_sprig(
      "mask --spec " + tmp.path + "/mask.json --out " + tmp.path + "/m.safetensors", tmp.path);
  EXPECT_EQ(mask.exit_code, 1);
  EXPECT_EQ(mask.err.rfind("sprig: [mask] the dense [4611686018427387904, 4611686018427387904] "
                           "mask needs 20282409603651670423947251286016 MiB, over half the ",
                           0),
            0u)
      << mask.err;
  EXPECT_FALSE(std::filesystem::exists(tmp.path + "/m.safetensors"));
  // 48 bytes a token: (2^63 - 1) x 48 / 2^20 MiB.
  write_text(tmp.path + "/docs.jsonl", "{\"input_ids\": [1, 2]}\n");
  const CliRun pack = run_sprig("data pack --input " + tmp.path +
                                    "/docs.jsonl --mode sft --seq-len 9223372036854775807 --out " +
                                    tmp.path + "/rows.jsonl",
                                tmp.path);
  EXPECT_EQ(pack.exit_code, 1);
  EXPECT_EQ(pack.err.rfind("sprig: [data] --seq-len 9223372036854775807 needs about "
                           "422212465065983 MiB per row, over a quarter of the ",
                           0),
            0u)
      << pack.err;
}

TEST(NumbersCli, AMetricThatIsNotANumberIsAnError) {
  const testing::NamedTempDir tmp("numbers_plot");
  write_text(tmp.path + "/metrics.jsonl", "{\"step\": 1, \"loss\": \"3.0\"}\n");
  const CliRun r = run_sprig("plot " + tmp.path, tmp.path);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err,
            "sprig: " + tmp.path + "/metrics.jsonl:1: \"loss\" must be a number, got \"3.0\"\n");
  EXPECT_EQ(r.out, "");
  EXPECT_FALSE(std::filesystem::exists(tmp.path + "/curves.png"));
}

}  // namespace
}  // namespace sprig
