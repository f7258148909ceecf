// A sliding-window checkpoint through every command a user runs on it (the `sprig` executable):
// converted from Hugging Face, scored as plain sequences and as packed documents, decoded, and
// trained. The window is checked independently of sprig's masks: with two windowed layers of
// window W, a token's logits depend on its last 2W - 1 tokens only, so they equal the logits of
// that span scored alone (attention scores depend on relative positions only).
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "nn/checkpoint.h"
#include "tests/cli_run.h"
#include "tests/nn/checkpoint_fixtures.h"
#include "tests/nn/reference_decoding.h"
#include "tests/test_util.h"

namespace sprig {
namespace {

constexpr int64_t kWindow = 4;

// tiny_qwen3.json with both layers windowed, weights large enough that context matters.
nlohmann::json windowed_config_json() {
  std::ifstream in(testing::source_dir() + "/train/configs/tiny_qwen3.json");
  nlohmann::json j = nlohmann::json::parse(in);
  j["use_sliding_window"] = true;
  j["sliding_window"] = kWindow;
  j["layer_types"] = {"sliding_attention", "sliding_attention"};
  j["max_window_layers"] = 0;
  j["initializer_range"] = 0.5;
  return j;
}

class SlidingWindowCli : public ::testing::Test {
 protected:
  SlidingWindowCli() : tmp_("cli_sliding_window") {
    Generator gen(21);
    QwenForCausalLM hf(QwenConfig::from_json(windowed_config_json()), gen);
    save_qwen(hf, dir + "/hf");
    const testing::CliRun r =
        testing::run_sprig("convert --from-hf " + dir + "/hf --out " + model, dir);
    EXPECT_EQ(r.exit_code, 0) << r.err;
  }

  // Scores the JSONL `text` on the CPU; returns the written logits per record.
  std::vector<Tensor> score(const std::string& text) {
    testing::write_text(dir + "/records.jsonl", text);
    const testing::CliRun r =
        testing::run_sprig("score --device cpu --model " + model + " --input " + dir +
                               "/records.jsonl --out " + dir + "/logits.safetensors",
                           dir);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    std::vector<Tensor> logits;
    const SafetensorsFile out(dir + "/logits.safetensors");
    for (size_t i = 0; i < out.tensors().size(); ++i)
      logits.push_back(out.load("logits." + std::to_string(i)));
    return logits;
  }

  testing::NamedTempDir tmp_;
  const std::string& dir = tmp_.path;
  const std::string model = dir + "/model";
};

std::string record(const char* key, const nlohmann::json& value) {
  return nlohmann::json{{key, value}}.dump() + "\n";
}

TEST_F(SlidingWindowCli, ScoringSeesOnlyTheWindow) {
  const std::vector<int64_t> seq = {5, 17, 3, 60, 40, 9, 9, 61, 2, 33, 12, 7, 19, 44};
  const int64_t span = 2 * kWindow - 1, T = static_cast<int64_t>(seq.size());
  std::string text = record("input_ids", seq);
  for (int64_t t = span - 1; t < T; ++t)
    text +=
        record("input_ids", std::vector<int64_t>(seq.begin() + t - span + 1, seq.begin() + t + 1));
  const std::vector<Tensor> logits = score(text);
  ASSERT_EQ(logits.size(), static_cast<size_t>(1 + T - span + 1));
  for (int64_t t = span - 1; t < T; ++t) {
    const Tensor alone = logits[static_cast<size_t>(t - span + 2)].select(0, span - 1);
    // RoPE angles are rounded at different absolute positions: a few f32 ulps of the logits.
    EXPECT_TRUE(testing::all_close(logits[0].select(0, t), alone, 1e-4, 1e-4)) << "token " << t;
  }
  // The window matters: the same weights with full attention give other logits.
  nlohmann::json full = windowed_config_json();
  full.erase("layer_types");
  full["use_sliding_window"] = false;
  Generator gen(21);
  QwenForCausalLM full_model(QwenConfig::from_json(full), gen);
  NoGradGuard no_grad;
  const Tensor ids = Tensor::from_vector(seq, {1, T});
  const Tensor full_logits =
      full_model.logits(full_model.hidden(causal_input(ids, full_model.config()))).value();
  EXPECT_GT(
      testing::max_abs_diff(full_logits.select(0, 0).select(0, T - 1), logits[0].select(0, T - 1)),
      1e-2);
}

TEST_F(SlidingWindowCli, PackedDocumentsScoreLikeEachDocumentAlone) {
  const std::vector<std::vector<int64_t>> docs = {{5, 17, 3, 60, 40, 9, 9, 61}, {2, 33, 12, 7, 19}};
  const std::vector<Tensor> logits = score(
      record("documents", docs) + record("input_ids", docs[0]) + record("input_ids", docs[1]));
  ASSERT_EQ(logits.size(), 3u);
  EXPECT_TRUE(testing::all_close(logits[0].narrow(0, 0, 8), logits[1], 1e-5, 1e-5));
  EXPECT_TRUE(testing::all_close(logits[0].narrow(0, 8, 5), logits[2], 1e-5, 1e-5));
}

TEST_F(SlidingWindowCli, GenerateEqualsFullForwardArgmax) {
  const testing::CliRun r = testing::run_sprig(
      "generate --device cpu --model " + model + " --prompt-ids 3,14,15,9,2,6 --max-new-tokens 10",
      dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<int64_t> want =
      testing::reference_greedy(*load_qwen(model), {3, 14, 15, 9, 2, 6}, 10);
  std::string expected;
  for (size_t i = 0; i < want.size(); ++i) {
    if (i > 0) expected += ",";
    expected += std::to_string(want[i]);
  }
  EXPECT_EQ(r.out, expected + "\n");
}

TEST_F(SlidingWindowCli, TrainsOnPackedDocumentsAndRefusesPrefixTrees) {
  const std::string config = dir + "/train.yaml";
  testing::write_text(config, "run_dir: " + dir + "/run\ndevice: cpu\nmodel: {path: " + model +
                                  "}\ndata:\n  train: " + testing::source_dir() +
                                  "/train/configs/tiny_docs.jsonl\n  format: documents\n"
                                  "  seq_len: 32\n  packing: bfd\n  micro_batch_size: 2\n"
                                  "  max_packs: 4\ntrain: {max_steps: 3}\nlog: {every_steps: 1}\n");
  const testing::CliRun trained = testing::run_sprig("train sft -c " + config, dir);
  ASSERT_EQ(trained.exit_code, 0) << trained.err;
  std::ifstream metrics(dir + "/run/metrics.jsonl");
  int64_t records = 0;
  for (std::string line; std::getline(metrics, line); ++records)
    EXPECT_TRUE(std::isfinite(nlohmann::json::parse(line).at("loss").get<double>())) << line;
  EXPECT_EQ(records, 3);

  const testing::CliRun folded = testing::run_sprig(
      "train sft -c " + config + " --run_dir=" + dir + "/run2 --data.format=rollouts " +
          "--data.packing=fold --data.seq_len=256 --data.train=" + testing::source_dir() +
          "/train/configs/tiny_rollouts.jsonl",
      dir);
  EXPECT_EQ(folded.exit_code, 1);
  EXPECT_EQ(folded.err,
            "sprig: [prefix_tree_input] prefix trees cannot feed a sliding-window model "
            "(window 4)\n");
}

}  // namespace
}  // namespace sprig
