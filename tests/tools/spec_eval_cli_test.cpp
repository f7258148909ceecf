// `sprig spec-eval` end to end on the golden pair (tests/golden: qwen3_tiny, dflash_tiny): one JSON
// line per prompt whose output equals `sprig generate`'s, then the aggregate, with the human
// table on stderr; bad records and options stop with one sentence.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tests/cli_run.h"
#include "tests/nn/checkpoint_fixtures.h"
#include "tests/nn/golden_check.h"

namespace sprig {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using testing::kGoldenDir;
using testing::run_sprig;

class SpecEvalCli : public ::testing::Test {
 protected:
  testing::CliRun spec_eval(const std::string& records, const std::string& args = "") {
    testing::write_text(input, records);
    return run_sprig("spec-eval --device cpu --target " + kGoldenDir + "qwen3_tiny --draft " +
                         kGoldenDir + "dflash_tiny --input " + input + " " + args,
                     tmp.path);
  }

  testing::NamedTempDir tmp{"spec_eval_cli"};
  std::string input = tmp.path + "/prompts.jsonl";
};

TEST_F(SpecEvalCli, OutputsEqualGreedyDecodingAndTheAggregateFollows) {
  const std::vector<std::string> prompts = {"3,14,15,92,65", "7,1,8,2,8,18,28,4", "42"};
  std::string records;
  for (const std::string& p : prompts) records += "{\"prompt_ids\": [" + p + "]}\n";
  const testing::CliRun r = spec_eval(records, "--max-new-tokens 10 --block-size 3");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<json> lines;
  std::istringstream out(r.out);
  for (std::string line; std::getline(out, line);) lines.push_back(json::parse(line));
  ASSERT_EQ(lines.size(), prompts.size() + 1);
  for (size_t i = 0; i < prompts.size(); ++i) {
    const testing::CliRun greedy =
        run_sprig("generate --device cpu --model " + kGoldenDir +
                      "qwen3_tiny --max-new-tokens 10 --prompt-ids " + prompts[i],
                  tmp.path);
    ASSERT_EQ(greedy.exit_code, 0) << greedy.err;
    std::string ids;
    for (const json& id : lines[i]["output_ids"]) {
      if (!ids.empty()) ids += ',';
      ids += id.dump();
    }
    EXPECT_EQ(ids + "\n", greedy.out);
    EXPECT_TRUE(lines[i]["lossless"].get<bool>());
    int64_t committed = 1;  // the prefill's token
    for (const json& a : lines[i]["accepted_per_step"]) committed += a.get<int64_t>();
    EXPECT_EQ(committed, 10);
    EXPECT_EQ(lines[i]["target_forwards"].get<int64_t>(),
              static_cast<int64_t>(lines[i]["accepted_per_step"].size()));
  }
  const json& a = lines.back().at("aggregate");
  EXPECT_EQ(a["prompts"], 3);
  EXPECT_EQ(a["lossless_prompts"], 3);
  EXPECT_EQ(a["new_tokens"], 30);
  EXPECT_EQ(a["acceptance_by_slot"].size(), 2u);  // block 3: two drafts per step
  for (const char* key : {"tau", "teacher_forced_accept_len", "speedup", "tokens_per_second",
                          "verify_step_vs_decode_step", "draft_step_vs_decode_step"})
    EXPECT_TRUE(a.contains(key)) << key;
  EXPECT_GE(a["tau"].get<double>(), 1.0);
  EXPECT_NE(r.err.find("acceptance by draft slot:"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("speed-up"), std::string::npos) << r.err;
}

// Decoding past the target's max_position_embeddings (128) warns once and stays lossless.
TEST_F(SpecEvalCli, PastTheTargetsPositionsWarnsAndStaysLossless) {
  const testing::CliRun r = spec_eval("{\"prompt_ids\": [1, 2]}\n", "--max-new-tokens 140");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("sprig: [spec-eval] warning: " + input +
                       ":1: decoding a 2-token prompt with --max-new-tokens 140 reaches position "
                       "141, past the model's max_position_embeddings 128"),
            std::string::npos)
      << r.err;
  const json line = json::parse(r.out.substr(0, r.out.find('\n')));
  EXPECT_TRUE(line["lossless"].get<bool>());
  EXPECT_EQ(line["output_ids"].size(), 140u);
}

// A target and a draft with YaRN positions (tests/golden/make_rope_golden.py's "yarn" case):
// spec-eval and `sprig generate` both decode transformers' greedy ids, to position 142.
TEST_F(SpecEvalCli, ScaledRopeDecodesAsTransformersGenerates) {
  const SafetensorsFile expected(kGoldenDir + "rope_expected.safetensors");
  const json rope = json::parse(expected.metadata().at("cases"))["yarn"]["rope_parameters"];
  for (const std::string name : {"qwen3_tiny", "dflash_tiny"}) {
    fs::copy(kGoldenDir + name, tmp.path + "/" + name, fs::copy_options::recursive);
    json config = json::parse(testing::read_text(tmp.path + "/" + name + "/config.json"));
    config["rope_parameters"] = rope;
    testing::write_text(tmp.path + "/" + name + "/config.json", config.dump());
  }
  const std::vector<int64_t> ids = expected.load("input_ids").to_vector<int64_t>();
  std::string prompt;
  for (size_t i = 0; i < 13; ++i) prompt += (i ? "," : "") + std::to_string(ids[i]);
  const std::vector<int64_t> want = expected.load("yarn.greedy").to_vector<int64_t>();
  std::string want_text;
  for (const int64_t id : want) want_text += (want_text.empty() ? "" : ",") + std::to_string(id);

  testing::write_text(input, "{\"prompt_ids\": [" + prompt + "]}\n");
  const testing::CliRun r =
      run_sprig("spec-eval --device cpu --target " + tmp.path + "/qwen3_tiny --draft " + tmp.path +
                    "/dflash_tiny --max-new-tokens 130 --input " + input,
                tmp.path);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json line = json::parse(r.out.substr(0, r.out.find('\n')));
  EXPECT_EQ(line["output_ids"].get<std::vector<int64_t>>(), want);
  EXPECT_TRUE(line["lossless"].get<bool>());
  const testing::CliRun greedy =
      run_sprig("generate --device cpu --model " + tmp.path +
                    "/qwen3_tiny --max-new-tokens 130 --prompt-ids " + prompt,
                tmp.path);
  ASSERT_EQ(greedy.exit_code, 0) << greedy.err;
  EXPECT_EQ(greedy.out, want_text + "\n");
}

TEST_F(SpecEvalCli, BadRecordsAndOptionsStopWithOneSentence) {
  // Every record is checked before any decoding: nothing is printed to stdout.
  testing::CliRun r =
      spec_eval("{\"prompt_ids\": [1, 2]}\n{\"prompt_ids\": []}\n", "--max-new-tokens 4");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find(input + ":2: a record needs \"prompt_ids\""), std::string::npos) << r.err;
  EXPECT_EQ(r.out, "");
  r = spec_eval("{\"prompt_ids\": [1, 2]}\n{\"input_ids\": [1]}\n", "--max-new-tokens 4");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find(input + ":2: unknown key \"input_ids\" (did you mean \"prompt_ids\"?)"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.out, "");
  // Past max_position_embeddings (128): refused under --strict-positions before any output.
  r = spec_eval("{\"prompt_ids\": [1, 2]}\n", "--max-new-tokens 127 --strict-positions");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("sprig: [spec-eval] " + input +
                       ":1: decoding a 2-token prompt with --max-new-tokens 127 reaches position "
                       "128, past the model's max_position_embeddings 128 (--strict-positions)"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.out, "");
  r = spec_eval("{\"prompt_ids\": [1, 96]}\n");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find(":1: prompt id 96 is outside the vocabulary [0, 96)"), std::string::npos)
      << r.err;
  // As written: read as int64, 2^64 - 1 would be -1.
  r = spec_eval("{\"prompt_ids\": [1, 18446744073709551615]}\n");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find(":1: prompt id 18446744073709551615 is outside the vocabulary [0, 96)"),
            std::string::npos)
      << r.err;
  r = spec_eval("{\"prompt_ids\": [1, -1]}\n");
  EXPECT_NE(r.err.find(":1: prompt id -1 is outside the vocabulary [0, 96)"), std::string::npos)
      << r.err;
  r = spec_eval("{\"prompt_ids\": [1]}\n", "--block-size 9 --max-new-tokens 4");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err,
            "sprig: [spec-eval] --block-size 9 must be in [2, 4], the draft's block size (or 0)\n");
  r = spec_eval("{\"prompt_ids\": [1]}\n", "--stop-id 96 --max-new-tokens 4");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "sprig: [spec-eval] --stop-id 96 is outside the vocabulary [0, 96)\n");
  r = spec_eval("", "--max-new-tokens 4");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("no records"), std::string::npos) << r.err;
  r = spec_eval("{\"prompt_ids\": [1]}\n", "--max-new-tokens 0");
  EXPECT_EQ(r.exit_code, 2);
  r = spec_eval("{\"prompt_ids\": [1]}\n", "--tree-topk 2");  // an EAGLE-3 option
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--draft-tokens and --tree-topk apply to EAGLE-3 drafts"), std::string::npos)
      << r.err;
}

// A copy of a golden model whose config.json declares bf16 over its f32 weights.
std::string relabelled_bf16(const std::string& name, const std::string& dir) {
  const std::string copy = dir + "/" + name;
  fs::copy(kGoldenDir + name, copy, fs::copy_options::recursive);
  std::ifstream in(copy + "/config.json");
  json config = json::parse(in);
  for (const char* key : {"dtype", "torch_dtype"})
    if (config.contains(key)) config[key] = "bfloat16";
  testing::write_text(copy + "/config.json", config.dump());
  return copy;
}

TEST_F(SpecEvalCli, OptionsAreCheckedBeforeAnyWeightIsReadAndADraftsDtypeIsChecked) {
  // Both configs contradict their weights' dtype: a load would warn about each.
  const std::string target = relabelled_bf16("qwen3_tiny", tmp.path),
                    draft = relabelled_bf16("dflash_tiny", tmp.path);
  testing::write_text(input, "{\"prompt_ids\": [1, 2]}\n");
  const std::string base =
      "spec-eval --device cpu --target " + target + " --draft " + draft + " --input " + input;
  // An option error comes alone: no weight was read, so no load warning precedes it.
  testing::CliRun r = run_sprig(base + " --block-size 9", tmp.path);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err,
            "sprig: [spec-eval] --block-size 9 must be in [2, 4], the draft's block size (or 0)\n");
  EXPECT_EQ(r.out, "");
  r = run_sprig(base + " --stop-id 96", tmp.path);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "sprig: [spec-eval] --stop-id 96 is outside the vocabulary [0, 96)\n");
  // A run warns once for each, the draft included, and decodes the weights as stored.
  r = run_sprig(base + " --max-new-tokens 4", tmp.path);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const std::string& dir : {target, draft})
    EXPECT_NE(r.err.find("sprig: [checkpoint] warning: " + dir +
                         "/config.json declares dtype bfloat16, but its weights are float32: "
                         "they are read as stored, and an export says float32\n"),
              std::string::npos)
        << r.err;
}

}  // namespace
}  // namespace sprig
