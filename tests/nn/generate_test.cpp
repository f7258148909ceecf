// Greedy decoding with the KV cache equals argmax decoding by repeated full forwards.
#include "nn/generate.h"

#include <gtest/gtest.h>

#include <set>

#include "tests/nn/reference_decoding.h"
#include "tests/test_util.h"

namespace sprig {
namespace {

QwenConfig tiny_config(const std::string& type, int64_t window = 0) {
  nlohmann::json j = {{"model_type", type},
                      {"vocab_size", 50},
                      {"hidden_size", 32},
                      {"intermediate_size", 48},
                      {"num_hidden_layers", 2},
                      {"num_attention_heads", 4},
                      {"num_key_value_heads", 2},
                      {"head_dim", 8},
                      {"rope_theta", 10000.0},
                      {"initializer_range", 0.2},
                      {"tie_word_embeddings", type == "qwen2"}};
  if (window > 0) {
    j["use_sliding_window"] = true;
    j["sliding_window"] = window;
    j["max_window_layers"] = 1;  // layer 1 slides
  }
  return QwenConfig::from_json(j);
}

class GenerateTest : public ::testing::TestWithParam<std::pair<std::string, int64_t>> {};

TEST_P(GenerateTest, CachedDecodingEqualsFullForwards) {
  Generator gen(7);
  QwenForCausalLM model(tiny_config(GetParam().first, GetParam().second), gen);
  const std::vector<int64_t> prompt = {3, 14, 15, 9, 26, 5};
  const std::vector<int64_t> cached = generate_greedy(model, prompt, 12);
  ASSERT_EQ(cached.size(), 12u);
  EXPECT_EQ(cached, testing::reference_greedy(model, prompt, 12));
  // Not a constant sequence: the test would pass trivially otherwise.
  EXPECT_GT(std::set<int64_t>(cached.begin(), cached.end()).size(), 1u);
}

INSTANTIATE_TEST_SUITE_P(Models, GenerateTest,
                         ::testing::Values(std::make_pair(std::string("qwen3"), int64_t{0}),
                                           std::make_pair(std::string("qwen2"), int64_t{0}),
                                           std::make_pair(std::string("qwen3"), int64_t{4})));

TEST(Generate, StopsAtStopIdAndRejectsBadPrompts) {
  Generator gen(7);
  QwenForCausalLM model(tiny_config("qwen3"), gen);
  const std::vector<int64_t> prompt = {1, 2, 3};
  const std::vector<int64_t> full = generate_greedy(model, prompt, 6);
  const std::vector<int64_t> stopped = generate_greedy(model, prompt, 6, full[2]);
  EXPECT_LE(stopped.size(), 3u);
  EXPECT_EQ(stopped.back(), full[2]);
  EXPECT_THROW(generate_greedy(model, {}, 3), std::invalid_argument);
  EXPECT_THROW(generate_greedy(model, {1, 50}, 3), std::invalid_argument);
}

}  // namespace
}  // namespace sprig
