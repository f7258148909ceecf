// config.json parsing: real Qwen2 / Qwen2.5 / Qwen3 configs (legacy and transformers-5 field
// names), sliding-window layer rules, and one exact error message per kind of bad config.
#include "nn/qwen_config.h"

#include <gtest/gtest.h>

#include <fstream>

#include "nn/qwen.h"
#include "tests/nn/checkpoint_fixtures.h"

namespace sprig {
namespace {

using json = nlohmann::json;

// Qwen2.5-0.5B's config.json (head_dim from hidden / heads, tied, a disabled sliding window).
json qwen25_config() {
  return json::parse(R"({
    "architectures": ["Qwen2ForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 151643,
    "eos_token_id": 151643, "hidden_act": "silu", "hidden_size": 896, "initializer_range": 0.02,
    "intermediate_size": 4864, "max_position_embeddings": 32768, "max_window_layers": 24,
    "model_type": "qwen2", "num_attention_heads": 14, "num_hidden_layers": 24,
    "num_key_value_heads": 2, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0,
    "sliding_window": 32768, "tie_word_embeddings": true, "torch_dtype": "bfloat16",
    "transformers_version": "4.40.1", "use_cache": true, "use_sliding_window": false,
    "vocab_size": 151936})");
}

// Qwen3-0.6B's config.json (explicit head_dim: 16 * 128 != 1024, integer rope_theta, nulls).
json qwen3_config() {
  return json::parse(R"({
    "architectures": ["Qwen3ForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
    "head_dim": 128, "hidden_act": "silu", "hidden_size": 1024, "initializer_range": 0.02,
    "intermediate_size": 3072, "max_position_embeddings": 40960, "max_window_layers": 28,
    "model_type": "qwen3", "num_attention_heads": 16, "num_hidden_layers": 28,
    "num_key_value_heads": 8, "rms_norm_eps": 1e-06, "rope_scaling": null, "rope_theta": 1000000,
    "sliding_window": null, "tie_word_embeddings": true, "torch_dtype": "bfloat16",
    "use_cache": true, "use_sliding_window": false, "vocab_size": 151936})");
}

// A small Qwen2 config to mutate in the error tests.
json small_qwen2() {
  return {{"model_type", "qwen2"},    {"architectures", {"Qwen2ForCausalLM"}},
          {"vocab_size", 64},         {"hidden_size", 32},
          {"intermediate_size", 48},  {"num_hidden_layers", 4},
          {"num_attention_heads", 4}, {"num_key_value_heads", 2}};
}

// The message of the std::runtime_error that parsing `j` throws, or "" when it parses.
std::string parse_error(const json& j) {
  try {
    QwenConfig::from_json(j);
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

TEST(QwenConfig, ParsesQwen25) {
  const QwenConfig c = QwenConfig::from_json(qwen25_config());
  EXPECT_EQ(c.model_type, "qwen2");
  EXPECT_EQ(c.vocab_size, 151936);
  EXPECT_EQ(c.hidden_size, 896);
  EXPECT_EQ(c.intermediate_size, 4864);
  EXPECT_EQ(c.num_hidden_layers, 24);
  EXPECT_EQ(c.num_attention_heads, 14);
  EXPECT_EQ(c.num_key_value_heads, 2);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.max_position_embeddings, 32768);
  EXPECT_DOUBLE_EQ(c.rope.theta, 1e6);
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-6);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.dtype, DType::bf16);
  EXPECT_TRUE(c.has_qkv_bias());
  EXPECT_FALSE(c.has_o_bias());
  EXPECT_FALSE(c.has_qk_norm());
  // use_sliding_window false: every layer attends fully although sliding_window is set.
  EXPECT_EQ(c.sliding_window_per_layer, std::vector<int64_t>(24, 0));
}

TEST(QwenConfig, ParsesQwen3) {
  const QwenConfig c = QwenConfig::from_json(qwen3_config());
  EXPECT_EQ(c.model_type, "qwen3");
  EXPECT_EQ(c.head_dim, 128);  // explicit, not 1024 / 16
  EXPECT_EQ(c.num_key_value_heads, 8);
  EXPECT_DOUBLE_EQ(c.rope.theta, 1e6);
  EXPECT_TRUE(c.has_qk_norm());
  EXPECT_FALSE(c.has_qkv_bias());
  EXPECT_EQ(c.sliding_window_per_layer, std::vector<int64_t>(28, 0));
  json biased = qwen3_config();
  biased["attention_bias"] = true;
  const QwenConfig b = QwenConfig::from_json(biased);
  EXPECT_TRUE(b.has_qkv_bias());
  EXPECT_TRUE(b.has_o_bias());
}

TEST(QwenConfig, ParsesQwen2WithDefaults) {
  // An original Qwen2 config: untied, no rms_norm_eps / rope_theta / dtype / kv heads fields.
  json j = small_qwen2();
  j.erase("num_key_value_heads");
  j["tie_word_embeddings"] = false;
  const QwenConfig c = QwenConfig::from_json(j);
  EXPECT_EQ(c.num_key_value_heads, 4);  // defaults to the query heads
  EXPECT_EQ(c.head_dim, 8);
  EXPECT_DOUBLE_EQ(c.rope.theta, 10000.0);
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-6);
  EXPECT_DOUBLE_EQ(c.initializer_range, 0.02);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_EQ(c.dtype, DType::bf16);
}

TEST(QwenConfig, AcceptsTransformers5FieldNames) {
  // transformers 5 writes `dtype` and `rope_parameters` (and layer_types) instead.
  json j = qwen3_config();
  j.erase("torch_dtype");
  j.erase("rope_theta");
  j.erase("rope_scaling");
  j["dtype"] = "float32";
  j["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 5e5}};
  j["layer_types"] = std::vector<std::string>(28, "full_attention");
  const QwenConfig c = QwenConfig::from_json(j);
  EXPECT_EQ(c.dtype, DType::f32);
  EXPECT_DOUBLE_EQ(c.rope.theta, 5e5);
  EXPECT_EQ(c.sliding_window_per_layer, std::vector<int64_t>(28, 0));

  j["dtype"] = "float16";
  j["torch_dtype"] = "float32";  // `dtype` wins when both are present
  j["rope_theta"] = 123.0;       // rope_parameters wins over the legacy field
  const QwenConfig d = QwenConfig::from_json(j);
  EXPECT_EQ(d.dtype, DType::f16);
  EXPECT_DOUBLE_EQ(d.rope.theta, 5e5);
}

TEST(QwenConfig, SlidingWindowLayerRules) {
  json j = small_qwen2();
  j["use_sliding_window"] = true;
  j["sliding_window"] = 4096;
  j["max_window_layers"] = 2;  // HF: layers >= max_window_layers slide
  EXPECT_EQ(QwenConfig::from_json(j).sliding_window_per_layer,
            (std::vector<int64_t>{0, 0, 4096, 4096}));
  j.erase("max_window_layers");  // defaults to every layer attending fully
  EXPECT_EQ(QwenConfig::from_json(j).sliding_window_per_layer, std::vector<int64_t>(4, 0));
  j["layer_types"] = {"sliding_attention", "full_attention", "sliding_attention",
                      "full_attention"};  // explicit types win over the rule
  j["max_window_layers"] = 2;
  EXPECT_EQ(QwenConfig::from_json(j).sliding_window_per_layer,
            (std::vector<int64_t>{4096, 0, 4096, 0}));
  j["use_sliding_window"] = false;
  j.erase("layer_types");
  EXPECT_EQ(QwenConfig::from_json(j).sliding_window_per_layer, std::vector<int64_t>(4, 0));
}

// Found by fuzz_qwen_config: a negative max_window_layers indexed before the layer table, and a
// huge layer count allocated its table before anything else could fail.
TEST(QwenConfig, RejectsBadLayerCounts) {
  json j = small_qwen2();
  j["use_sliding_window"] = true;
  j["sliding_window"] = 8;
  j["max_window_layers"] = -2;
  EXPECT_EQ(parse_error(j),
            "config.json: \"max_window_layers\" must be a non-negative integer, got -2");
  j["max_window_layers"] = "2";
  EXPECT_EQ(parse_error(j),
            "config.json: \"max_window_layers\" must be a non-negative integer, got \"2\"");
  j["max_window_layers"] = 9;  // beyond the last layer: nothing slides
  EXPECT_EQ(QwenConfig::from_json(j).sliding_window_per_layer, std::vector<int64_t>(4, 0));
  j["num_hidden_layers"] = 40000000000;
  EXPECT_EQ(parse_error(j), "config.json: \"num_hidden_layers\" 40000000000 is more than 65536");
}

TEST(QwenConfig, RejectsUnsupportedModels) {
  json j = small_qwen2();
  j["model_type"] = "llama";
  EXPECT_EQ(parse_error(j),
            "config.json: model_type \"llama\" is not supported (sprig loads "
            "dense qwen2 and qwen3 models)");
  j.erase("model_type");
  EXPECT_EQ(parse_error(j),
            "config.json: model_type \"\" is not supported (sprig loads dense "
            "qwen2 and qwen3 models)");
  j = small_qwen2();
  j["model_type"] = "qwen3";
  EXPECT_EQ(parse_error(j),
            "config.json: architectures [\"Qwen2ForCausalLM\"] is not supported "
            "for model_type qwen3 (expected [\"Qwen3ForCausalLM\"])");
  j = small_qwen2();
  j["architectures"] = {"Qwen2ForSequenceClassification"};
  EXPECT_EQ(parse_error(j),
            "config.json: architectures [\"Qwen2ForSequenceClassification\"] is "
            "not supported for model_type qwen2 (expected [\"Qwen2ForCausalLM\"])");
  j = small_qwen2();
  j["hidden_act"] = "gelu";
  EXPECT_EQ(parse_error(j), "config.json: hidden_act \"gelu\" is not supported (only silu)");
  j = small_qwen2();
  j["torch_dtype"] = "float8_e4m3fn";
  EXPECT_EQ(parse_error(j), "config.json: unsupported torch_dtype \"float8_e4m3fn\"");
  EXPECT_EQ(parse_error(json::array({1, 2})), "config.json: config must be a JSON object");
}

TEST(QwenConfig, ParsesRopeScalingTypes) {
  json j = small_qwen2();
  j["max_position_embeddings"] = 131072;
  j["rope_scaling"] = {
      {"type", "yarn"}, {"factor", 4.0}, {"original_max_position_embeddings", 32768}};
  QwenConfig c = QwenConfig::from_json(j, "config.json");
  EXPECT_EQ(c.rope.type, RopeType::yarn);
  EXPECT_DOUBLE_EQ(c.rope.factor, 4.0);
  EXPECT_EQ(c.rope.original_max_position_embeddings, 32768);
  EXPECT_DOUBLE_EQ(c.rope.beta_fast, 32.0);
  EXPECT_TRUE(c.rope.truncate);
  // Written back in both spellings, and read back to the same rotation.
  const json out = c.to_json();
  EXPECT_EQ(out["rope_scaling"]["rope_type"], "yarn");
  EXPECT_EQ(out["rope_parameters"]["original_max_position_embeddings"], 32768);
  const QwenConfig back = QwenConfig::from_json(out, "config.json");
  EXPECT_EQ(back.rope.type, RopeType::yarn);
  EXPECT_EQ(back.rope.to_json(), c.rope.to_json());

  // yarn without a factor: the ratio of the lengths; the top-level original length wins.
  j["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", nullptr}};
  j["original_max_position_embeddings"] = 16384;
  c = QwenConfig::from_json(j, "config.json");
  EXPECT_DOUBLE_EQ(c.rope.factor, 8.0);
  EXPECT_EQ(c.rope.original_max_position_embeddings, 16384);
  j.erase("original_max_position_embeddings");

  j.erase("rope_scaling");
  j["rope_parameters"] = {{"rope_type", "linear"}, {"factor", 2.0}, {"rope_theta", 1e6}};
  c = QwenConfig::from_json(j, "config.json");
  EXPECT_EQ(c.rope.type, RopeType::linear);
  EXPECT_DOUBLE_EQ(c.rope.theta, 1e6);
  j["rope_parameters"] = {{"rope_type", "dynamic"}, {"factor", 2.0}};
  EXPECT_EQ(QwenConfig::from_json(j, "config.json").rope.type, RopeType::dynamic);
  j["rope_parameters"] = {{"rope_type", "llama3"},
                          {"factor", 8.0},
                          {"low_freq_factor", 1.0},
                          {"high_freq_factor", 4.0},
                          {"original_max_position_embeddings", 8192}};
  c = QwenConfig::from_json(j, "config.json");
  EXPECT_EQ(c.rope.type, RopeType::llama3);
  EXPECT_EQ(c.rope.original_max_position_embeddings, 8192);
  // An empty rope_scaling is no scaling; rope_parameters is read instead.
  j["rope_scaling"] = json::object();
  EXPECT_EQ(QwenConfig::from_json(j, "config.json").rope.type, RopeType::llama3);
}

TEST(QwenConfig, RejectsBadRope) {
  json j = small_qwen2();
  j["rope_scaling"] = {{"rope_type", "longrope"}, {"factor", 4.0}};
  EXPECT_EQ(parse_error(j),
            "config.json: rope scaling type \"longrope\" is not supported (sprig computes "
            "default, linear, dynamic, yarn and llama3)");
  j["rope_scaling"] = {{"rope_type", "linear"}};
  EXPECT_EQ(parse_error(j), "config.json: rope_scaling of type linear needs \"factor\"");
  j["rope_scaling"] = {{"rope_type", "linear"}, {"factor", 0.5}};
  EXPECT_EQ(parse_error(j),
            "config.json: rope_scaling.factor must be a finite number >= 1.0, got 0.5");
  j["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}, {"beta_fats", 32}};
  EXPECT_EQ(parse_error(j).rfind("config.json: rope_scaling: unknown key \"beta_fats\"", 0), 0u)
      << parse_error(j);
  j["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}, {"beta_fast", 1}, {"beta_slow", 2}};
  EXPECT_EQ(parse_error(j),
            "config.json: rope_scaling.beta_fast 1.0 is below beta_slow 2.0: the ramp would run "
            "backwards");
  j["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 1.0}};
  EXPECT_EQ(parse_error(j), "config.json: rope_scaling of type llama3 needs \"high_freq_factor\"");
  j["rope_scaling"] = {
      {"rope_type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 4}, {"high_freq_factor", 1}};
  EXPECT_EQ(parse_error(j),
            "config.json: rope_scaling.high_freq_factor 1.0 must be above low_freq_factor 4.0");
  j["rope_scaling"] = {{"rope_type", "default"}, {"partial_rotary_factor", 0.5}};
  EXPECT_EQ(parse_error(j),
            "config.json: rope_scaling.partial_rotary_factor 0.5 is not supported: sprig rotates "
            "the whole head");
  j.erase("rope_scaling");
  j["rope_parameters"] = "default";
  EXPECT_EQ(parse_error(j), "config.json: rope_parameters must be an object, got \"default\"");
}

TEST(QwenConfig, RejectsNonPositiveRopeThetaAndEps) {
  json j = small_qwen2();
  j["rope_theta"] = 0;
  EXPECT_EQ(parse_error(j), "config.json: rope_theta must be a finite number > 0.0, got 0.0");
  j["rope_theta"] = -5e5;
  EXPECT_EQ(parse_error(j), "config.json: rope_theta must be a finite number > 0.0, got -500000.0");
  j["rope_theta"] = 1e6;
  j["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 0}};
  EXPECT_EQ(parse_error(j),
            "config.json: rope_parameters.rope_theta must be a finite number > 0.0, got 0.0");
  j.erase("rope_parameters");
  j["rms_norm_eps"] = 0;
  EXPECT_EQ(parse_error(j), "config.json: rms_norm_eps must be positive, got 0.000000");
}

TEST(QwenConfig, RejectsMissingAndNonIntegerSizes) {
  json j = small_qwen2();
  j.erase("hidden_size");
  EXPECT_EQ(parse_error(j), "config.json: missing required field \"hidden_size\"");
  j = small_qwen2();
  j["hidden_size"] = 32.5;
  EXPECT_EQ(parse_error(j), "config.json: \"hidden_size\" must be a positive integer, got 32.5");
  j = small_qwen2();
  j["num_hidden_layers"] = "4";
  EXPECT_EQ(parse_error(j),
            "config.json: \"num_hidden_layers\" must be a positive integer, got \"4\"");
  j = small_qwen2();
  j["vocab_size"] = 0;
  EXPECT_EQ(parse_error(j), "config.json: \"vocab_size\" must be a positive integer, got 0");
  j = small_qwen2();
  j["rms_norm_eps"] = "1e-6";
  EXPECT_EQ(parse_error(j), "config.json: \"rms_norm_eps\" must be a number, got \"1e-6\"");
}

TEST(QwenConfig, RejectsWrongFieldTypes) {
  json j = small_qwen2();
  j["tie_word_embeddings"] = "yes";
  EXPECT_EQ(parse_error(j),
            "config.json: \"tie_word_embeddings\" must be true or false, got \"yes\"");
  j = small_qwen2();
  j["model_type"] = 2;
  EXPECT_EQ(parse_error(j), "config.json: \"model_type\" must be a string, got 2");
  j = small_qwen2();
  j["torch_dtype"] = 16;
  EXPECT_EQ(parse_error(j), "config.json: \"torch_dtype\" must be a string, got 16");
  j = small_qwen2();
  j["layer_types"] = {"full_attention", 1, "full_attention", "full_attention"};
  EXPECT_EQ(parse_error(j), "config.json: \"layer_types\" entries must be strings, got 1");
}

TEST(QwenConfig, RejectsInconsistentHeads) {
  json j = small_qwen2();
  j["num_attention_heads"] = 6;
  j["num_key_value_heads"] = 4;
  EXPECT_EQ(parse_error(j),
            "config.json: num_attention_heads 6 is not a multiple of "
            "num_key_value_heads 4");
  j["num_key_value_heads"] = 3;  // 6 heads do not divide hidden 32 and there is no head_dim
  EXPECT_EQ(parse_error(j),
            "config.json: hidden_size is not divisible by num_attention_heads "
            "and head_dim is not set");
  j["head_dim"] = 8;  // an explicit head_dim makes it valid
  EXPECT_EQ(QwenConfig::from_json(j).head_dim, 8);
  j["head_dim"] = 7;
  EXPECT_EQ(parse_error(j), "config.json: head_dim must be even for rotary embeddings");
}

TEST(QwenConfig, RejectsBadLayerTypes) {
  json j = small_qwen2();
  j["layer_types"] = {"full_attention", "full_attention"};
  EXPECT_EQ(parse_error(j), "config.json: layer_types has 2 entries for 4 layers");
  j["layer_types"] = {"full_attention", "sliding_attention", "full_attention", "full_attention"};
  EXPECT_EQ(parse_error(j), "config.json: sliding_attention layers need a positive sliding_window");
  j["layer_types"] = {"full_attention", "chunked_attention", "full_attention", "full_attention"};
  EXPECT_EQ(parse_error(j), "config.json: layer type \"chunked_attention\" is not supported");
}

TEST(QwenConfig, LoadNamesTheFile) {
  const testing::NamedTempDir dir("qwen_config");
  const std::string path = dir.path + "/config.json";
  std::ofstream(path) << R"({"model_type": "qwen2",)";
  try {
    QwenConfig::load(path);
    ADD_FAILURE() << "accepted invalid JSON";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()).rfind(path + ": is not valid JSON: ", 0), 0u) << e.what();
  }
  std::ofstream(path) << R"({"model_type": "qwen2", "rope_theta": 1e99999})";
  try {
    QwenConfig::load(path);
    ADD_FAILURE() << "accepted a number beyond double's range";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()).rfind(path + ": is not valid JSON: ", 0), 0u) << e.what();
  }
  // A key twice: the reader would keep one silently (which one differs between libraries).
  std::ofstream(path) << "{\"model_type\": \"qwen2\",\n \"max_position_embeddings\": 128,\n "
                         "\"max_position_embeddings\": 4}";
  try {
    QwenConfig::load(path);
    ADD_FAILURE() << "accepted a key twice";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), path +
                                         ": is not valid JSON: key \"max_position_embeddings\" "
                                         "appears twice in one object");
  }
  std::ofstream(path) << qwen3_config().dump();
  EXPECT_EQ(QwenConfig::load(path).head_dim, 128);
  std::filesystem::remove(path);
  try {
    QwenConfig::load(path);
    ADD_FAILURE() << "loaded a missing file";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), path + ": cannot open the model config");
  }
}

TEST(QwenConfig, ToJsonRoundTrips) {
  for (const json& original : {qwen25_config(), qwen3_config()}) {
    const QwenConfig c = QwenConfig::from_json(original);
    const json written = c.to_json();
    const QwenConfig d = QwenConfig::from_json(written);
    EXPECT_EQ(d.model_type, c.model_type);
    EXPECT_EQ(d.head_dim, c.head_dim);
    EXPECT_EQ(d.num_key_value_heads, c.num_key_value_heads);
    EXPECT_EQ(d.tie_word_embeddings, c.tie_word_embeddings);
    EXPECT_EQ(d.rope.theta, c.rope.theta);
    EXPECT_EQ(d.dtype, c.dtype);
    EXPECT_EQ(d.sliding_window_per_layer, c.sliding_window_per_layer);
    // Fields sprig does not use are kept, and transformers' required fields are present.
    EXPECT_EQ(written["use_cache"], true);
    EXPECT_EQ(written["architectures"], original["architectures"]);
    EXPECT_EQ(written["torch_dtype"], "bfloat16");
  }
}

// Absurd sizes are refused with a sentence naming the key before anything is allocated, never
// with std::bad_alloc: a vocabulary beyond 32-bit token ids when parsed, parameters beyond the
// memory available when a model is built.
TEST(QwenConfig, AbsurdSizesNameTheKeyBeforeAnyAllocation) {
  json j = small_qwen2();
  j["vocab_size"] = int64_t{10000000000};
  EXPECT_EQ(parse_error(j),
            "config.json: \"vocab_size\" 10000000000 is more than 2147483647: "
            "token ids are 32-bit");
  const auto build_error = [](const char* key, int64_t value) {
    json c = small_qwen2();
    c[key] = value;
    Generator gen(0);
    try {
      QwenForCausalLM model(QwenConfig::from_json(c), gen);
    } catch (const std::runtime_error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  const std::string hidden = build_error("hidden_size", 1000000000);
  EXPECT_EQ(hidden.rfind("[qwen] ", 0), 0u) << hidden;
  EXPECT_NE(hidden.find("GiB of memory available; the largest part is the attention: "
                        "num_hidden_layers 4 x hidden_size 1000000000 x 2 (num_attention_heads 4 "
                        "+ num_key_value_heads 2) x head_dim 250000000"),
            std::string::npos)
      << hidden;
  EXPECT_NE(build_error("intermediate_size", 100000000)
                .find("the largest part is the MLP: num_hidden_layers 4 x 3 x hidden_size 32 x "
                      "intermediate_size 100000000"),
            std::string::npos);
  EXPECT_NE(build_error("vocab_size", 1000000000)
                .find("the embedding and head: vocab_size 1000000000 x hidden_size 32"),
            std::string::npos);
}

}  // namespace
}  // namespace sprig
