// RoPE scaling against transformers (tests/golden/make_rope_golden.py): for every rope type the
// frequencies and attention scaling equal transformers' bit for bit (one case within an ulp), and
// the tiny Qwen3 with that rope_parameters, loaded through the checkpoint reader, reproduces its
// logits at positions far into the scaled range (the long dynamic case past
// max_position_embeddings), its greedy generation with the KV cache past max_position_embeddings,
// and its training loss and gradients.
#include <gtest/gtest.h>

#include <bit>
#include <nlohmann/json.hpp>

#include "nn/generate.h"
#include "tests/nn/checkpoint_fixtures.h"
#include "tests/nn/golden_check.h"

namespace sprig::testing {
namespace {

using nlohmann::json;

struct RopeCase {
  std::string name;
  json rope_parameters;
  int64_t position_offset;
  json top_level;  // keys set beside rope_parameters
};

std::vector<RopeCase> rope_cases(const SafetensorsFile& expected) {
  std::vector<RopeCase> out;
  const json cases = json::parse(expected.metadata().at("cases"));
  for (const auto& [name, c] : cases.items())
    out.push_back({name, c["rope_parameters"], c["position_offset"].get<int64_t>(),
                   c.value("top_level", json::object())});
  return out;
}

json tiny_config_with(const RopeCase& c) {
  json j = json::parse(read_text(kGoldenDir + "qwen3_tiny/config.json"));
  j.erase("rope_theta");
  j["rope_parameters"] = c.rope_parameters;
  j.update(c.top_level);
  return j;
}

// The tiny Qwen3 with the case's rope, read through the checkpoint reader.
std::unique_ptr<QwenForCausalLM> load_case(const RopeCase& c) {
  NamedTempDir dir("rope_" + c.name);
  fs::copy_file(kGoldenDir + "qwen3_tiny/model.safetensors", dir.path + "/model.safetensors");
  write_text(dir.path + "/config.json", tiny_config_with(c).dump());
  return load_qwen(dir.path);
}

// Causal rows whose positions start at `offset`.
QwenInput offset_input(const Tensor& ids, int64_t offset, const QwenConfig& config) {
  QwenInput in = causal_input(ids, config);
  std::vector<int64_t> pos;
  for (int64_t b = 0; b < ids.size(0); ++b)
    for (int64_t t = 0; t < ids.size(1); ++t) pos.push_back(offset + t);
  in.position_ids = Tensor::from_vector(pos, ids.shape());
  return in;
}

TEST(RopeScaling, FrequenciesEqualTransformers) {
  const SafetensorsFile expected(kGoldenDir + "rope_expected.safetensors");
  const std::vector<RopeCase> cases = rope_cases(expected);
  ASSERT_EQ(cases.size(), 10u);
  // Made by transformers 5, whose YaRN factor rule (an explicit factor as given) sprig follows.
  EXPECT_EQ(expected.metadata().at("transformers").substr(0, 2), "5.");
  for (const RopeCase& c : cases) {
    const QwenConfig config = QwenConfig::from_json(tiny_config_with(c), c.name);
    const RopeFrequencies f = config.rope.frequencies(config.head_dim, c.position_offset + 13);
    const std::vector<float> want = expected.load(c.name + ".inv_freq").to_vector<float>();
    ASSERT_EQ(f.inv_freq.size(), want.size()) << c.name;
    // The grown base of dynamic is a tensor, and torch's fp32 pow of a tensor base is within one
    // ulp of the correctly rounded power sprig takes; every other step is exact.
    const int64_t max_ulps = c.name == "dynamic_long" ? 1 : 0;
    for (size_t i = 0; i < want.size(); ++i)
      EXPECT_LE(std::abs(std::bit_cast<int32_t>(f.inv_freq[i]) - std::bit_cast<int32_t>(want[i])),
                max_ulps)
          << c.name << " frequency " << i << ": " << f.inv_freq[i] << " vs " << want[i];
    EXPECT_EQ(f.attention_scaling,
              expected.load(c.name + ".attention_scaling").to_vector<float>()[0])
        << c.name;
  }
}

TEST(RopeScaling, QwenLogitsEqualTransformers) {
  const SafetensorsFile expected(kGoldenDir + "rope_expected.safetensors");
  const Tensor ids = expected.load("input_ids");
  for (const RopeCase& c : rope_cases(expected)) {
    const auto model = load_case(c);
    const QwenInput in = offset_input(ids, c.position_offset, model->config());
    const double err =
        relative_error(model->logits(model->hidden(in)).value(), expected.load(c.name + ".logits"));
    EXPECT_LE(err, 2e-5) << c.name;
  }
}

// Greedy decoding with the KV cache from position 0 to 142, past max_position_embeddings (128),
// where the dynamic base grows step by step: every id equals transformers' `generate` (whose
// smallest top-2 logit gap, 1.1e-3, is far above the logits' agreement). With the default rope
// each sequence differs.
TEST(RopeScaling, GreedyGenerationEqualsTransformers) {
  const SafetensorsFile expected(kGoldenDir + "rope_expected.safetensors");
  const std::vector<int64_t> ids = expected.load("input_ids").to_vector<int64_t>();
  const std::vector<int64_t> prompt(ids.begin(), ids.begin() + 13);
  const auto plain = load_qwen(kGoldenDir + "qwen3_tiny");
  int generated = 0;
  for (const RopeCase& c : rope_cases(expected)) {
    if (!expected.contains(c.name + ".greedy")) continue;
    const std::vector<int64_t> want = expected.load(c.name + ".greedy").to_vector<int64_t>();
    ASSERT_EQ(want.size(), 130u) << c.name;
    EXPECT_EQ(generate_greedy(*load_case(c), prompt, 130), want) << c.name;
    EXPECT_NE(generate_greedy(*plain, prompt, 130), want) << c.name;
    ++generated;
  }
  EXPECT_EQ(generated, 4);  // linear, dynamic, yarn, llama3
}

// Training: the mean next-token loss of the offset rows and the gradients through the rotated
// queries and keys equal transformers' (the long dynamic case past max_position_embeddings).
TEST(RopeScaling, TrainingLossAndGradientsEqualTransformers) {
  const SafetensorsFile expected(kGoldenDir + "rope_expected.safetensors");
  const Tensor ids = expected.load("input_ids");
  int trained = 0;
  for (const RopeCase& c : rope_cases(expected)) {
    if (!expected.contains(c.name + ".loss")) continue;
    const auto model = load_case(c);
    const Var hidden = model->hidden(offset_input(ids, c.position_offset, model->config()));
    const Var loss = sum_all(model->token_losses(hidden, shift_labels(ids))) /
                     static_cast<double>(ids.size(0) * (ids.size(1) - 1));
    EXPECT_LE(relative_error(loss.value().reshape({1}), expected.load(c.name + ".loss")), 1e-5)
        << c.name;
    loss.backward();
    const auto params = model->named_parameters();
    for (const char* name :
         {"model.layers.0.self_attn.q_proj.weight", "model.layers.0.self_attn.k_proj.weight"}) {
      const auto p = std::find_if(params.begin(), params.end(),
                                  [&](const auto& named) { return named.first == name; });
      ASSERT_NE(p, params.end()) << name;
      EXPECT_LE(
          relative_error(p->second.grad(), expected.load(c.name + ".grad." + std::string(name))),
          1e-4)
          << c.name << " " << name;
    }
    ++trained;
  }
  EXPECT_EQ(trained, 2);  // dynamic past max_position_embeddings, yarn
}

// The rope types change the logits: the same positions under the default rope are far from each
// scaled case's (so the comparison above could not pass with the scaling ignored).
TEST(RopeScaling, EveryCaseDiffersFromTheDefaultRope) {
  const SafetensorsFile expected(kGoldenDir + "rope_expected.safetensors");
  const Tensor ids = expected.load("input_ids");
  const auto model = load_qwen(kGoldenDir + "qwen3_tiny");
  for (const RopeCase& c : rope_cases(expected)) {
    if (c.name == "dynamic_short") continue;  // within max_position_embeddings: the default rope
    const QwenInput in = offset_input(ids, c.position_offset, model->config());
    const double err =
        relative_error(model->logits(model->hidden(in)).value(), expected.load(c.name + ".logits"));
    EXPECT_GE(err, 1e-3) << c.name;
  }
}

}  // namespace
}  // namespace sprig::testing
