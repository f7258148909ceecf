// RoPE scaling against transformers (tests/golden/make_rope_golden.py): for every rope type the
// frequencies and attention scaling equal transformers' bit for bit (one case within an ulp), and
// the tiny Qwen3 with that rope_parameters, loaded through the checkpoint reader, reproduces its
// logits at positions far into the scaled range (the long dynamic case past
// max_position_embeddings).
#include <gtest/gtest.h>

#include <bit>
#include <nlohmann/json.hpp>

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
    NamedTempDir dir("rope_" + c.name);
    fs::copy_file(kGoldenDir + "qwen3_tiny/model.safetensors", dir.path + "/model.safetensors");
    write_text(dir.path + "/config.json", tiny_config_with(c).dump());
    const auto model = load_qwen(dir.path);
    const QwenInput in = offset_input(ids, c.position_offset, model->config());
    const double err =
        relative_error(model->logits(model->hidden(in)).value(), expected.load(c.name + ".logits"));
    EXPECT_LE(err, 2e-5) << c.name;
  }
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
