#include "nn/qwen_config.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <stdexcept>

#include "tensor/input_file.h"
#include "tensor/json_text.h"
#include "tensor/names.h"

namespace sprig {

namespace {

using json = nlohmann::json;

// More layers than any model has: the per-layer tables stay small whatever a config says.
constexpr int64_t kMaxLayers = 1 << 16;

[[noreturn]] void fail(const std::string& label, const std::string& msg) {
  throw std::runtime_error(label + ": " + msg);
}

int64_t get_int(const json& j, const char* key, const std::string& label) {
  if (!j.contains(key)) fail(label, std::string("missing required field \"") + key + "\"");
  if (!j[key].is_number_integer() || j[key].get<int64_t>() <= 0)
    fail(label, std::string("\"") + key + "\" must be a positive integer, got " + j[key].dump());
  return j[key].get<int64_t>();
}

double get_double(const json& j, const char* key, double fallback, const std::string& label) {
  if (!j.contains(key) || j[key].is_null()) return fallback;
  if (!j[key].is_number())
    fail(label, std::string("\"") + key + "\" must be a number, got " + j[key].dump());
  return j[key].get<double>();
}

std::string get_string(const json& j, const char* key, const std::string& fallback,
                       const std::string& label) {
  if (!j.contains(key) || j[key].is_null()) return fallback;
  if (!j[key].is_string())
    fail(label, std::string("\"") + key + "\" must be a string, got " + j[key].dump());
  return j[key].get<std::string>();
}

bool get_bool(const json& j, const char* key, bool fallback, const std::string& label) {
  if (!j.contains(key) || j[key].is_null()) return fallback;
  if (!j[key].is_boolean())
    fail(label, std::string("\"") + key + "\" must be true or false, got " + j[key].dump());
  return j[key].get<bool>();
}

bool is_set(const json& j, const char* key) { return j.contains(key) && !j[key].is_null(); }

// A finite number > `low` (>= with `inclusive`), named "<where>.<key>" ("<key>" at the top level,
// where `where` is empty).
double get_bounded(const json& j, const char* key, double fallback, double low, bool inclusive,
                   const std::string& where, const std::string& label) {
  const double v = get_double(j, key, fallback, label);
  if (!std::isfinite(v) || (inclusive ? v < low : v <= low))
    fail(label, (where.empty() ? "" : where + ".") + key + " must be a finite number " +
                    (inclusive ? ">= " : "> ") + json(low).dump() + ", got " + json(v).dump());
  return v;
}

// The rotary embedding as transformers reads it: `rope_scaling` (transformers 4) or
// `rope_parameters` (5), the first one set winning; `rope_theta` from that object, else the top
// level; `original_max_position_embeddings` from the top level (transformers gives it priority),
// else the object, else max_position_embeddings. Keys sprig does not know are refused with the
// closest known one, since a misspelt key silently changes every angle.
RopeParameters parse_rope(const json& j, int64_t max_position_embeddings,
                          const std::string& label) {
  RopeParameters r;
  r.theta = get_bounded(j, "rope_theta", 10000.0, 0, false, "", label);
  r.max_position_embeddings = max_position_embeddings;
  const char* key = is_set(j, "rope_scaling") && !j["rope_scaling"].empty() ? "rope_scaling"
                    : is_set(j, "rope_parameters")                          ? "rope_parameters"
                                                                            : nullptr;
  const json none = json::object();
  const json& p = key ? j[key] : none;
  const std::string where = key ? key : "rope";
  if (!p.is_object()) fail(label, where + " must be an object, got " + p.dump());
  static const std::vector<std::string> known = {"rope_type",
                                                 "type",
                                                 "rope_theta",
                                                 "factor",
                                                 "original_max_position_embeddings",
                                                 "attention_factor",
                                                 "mscale",
                                                 "mscale_all_dim",
                                                 "beta_fast",
                                                 "beta_slow",
                                                 "truncate",
                                                 "low_freq_factor",
                                                 "high_freq_factor",
                                                 "partial_rotary_factor"};
  for (const auto& entry : p.items())
    if (const std::string why = unknown_record_key(entry.key(), known); !why.empty())
      fail(label, where + ": " + why);
  if (is_set(p, "partial_rotary_factor") &&
      get_double(p, "partial_rotary_factor", 1.0, label) != 1.0)
    fail(label, where + ".partial_rotary_factor " + p["partial_rotary_factor"].dump() +
                    " is not supported: sprig rotates the whole head");
  const std::string type =
      get_string(p, "rope_type", get_string(p, "type", "default", label), label);
  r.theta = get_bounded(p, "rope_theta", r.theta, 0, false, where, label);
  if (type == "default") return r;
  static const std::pair<const char*, RopeType> types[] = {{"linear", RopeType::linear},
                                                           {"dynamic", RopeType::dynamic},
                                                           {"yarn", RopeType::yarn},
                                                           {"llama3", RopeType::llama3}};
  const auto found = std::find_if(std::begin(types), std::end(types),
                                  [&](const auto& t) { return type == t.first; });
  if (found == std::end(types))
    fail(label,
         "rope scaling type \"" + type +
             "\" is not supported (sprig computes default, linear, dynamic, yarn and llama3)");
  r.type = found->second;
  const auto require = [&](const char* name) {
    if (!p.contains(name)) fail(label, where + " of type " + type + " needs \"" + name + "\"");
  };
  require("factor");
  if (r.type == RopeType::yarn || r.type == RopeType::llama3) {
    r.original_max_position_embeddings = max_position_embeddings;
    for (const json* source : {&p, &j})
      if (is_set(*source, "original_max_position_embeddings"))
        r.original_max_position_embeddings =
            get_int(*source, "original_max_position_embeddings", label);
  }
  // yarn: a null factor is the ratio of the lengths, as transformers computes it
  const double implied =
      static_cast<double>(max_position_embeddings) /
      static_cast<double>(std::max<int64_t>(r.original_max_position_embeddings, 1));
  r.factor =
      get_bounded(p, "factor", r.type == RopeType::yarn ? implied : 0.0, 1.0, true, where, label);
  if (r.type == RopeType::yarn) {
    if (is_set(p, "attention_factor"))
      r.attention_factor = get_bounded(p, "attention_factor", 1.0, 0, false, where, label);
    if (is_set(p, "mscale")) r.mscale = get_bounded(p, "mscale", 0, 0, true, where, label);
    if (is_set(p, "mscale_all_dim"))
      r.mscale_all_dim = get_bounded(p, "mscale_all_dim", 0, 0, true, where, label);
    // transformers: a beta of 0 or null takes the default
    r.beta_fast = get_bounded(p, "beta_fast", 32.0, 0, true, where, label);
    r.beta_slow = get_bounded(p, "beta_slow", 1.0, 0, true, where, label);
    if (r.beta_fast == 0) r.beta_fast = 32.0;
    if (r.beta_slow == 0) r.beta_slow = 1.0;
    if (r.beta_fast < r.beta_slow)
      fail(label, where + ".beta_fast " + json(r.beta_fast).dump() + " is below beta_slow " +
                      json(r.beta_slow).dump() + ": the ramp would run backwards");
    r.truncate = get_bool(p, "truncate", true, label);
  }
  if (r.type == RopeType::llama3) {
    require("low_freq_factor");
    require("high_freq_factor");
    r.low_freq_factor = get_bounded(p, "low_freq_factor", 1.0, 0, false, where, label);
    r.high_freq_factor = get_bounded(p, "high_freq_factor", 4.0, 0, false, where, label);
    if (r.high_freq_factor <= r.low_freq_factor)
      fail(label, where + ".high_freq_factor " + json(r.high_freq_factor).dump() +
                      " must be above low_freq_factor " + json(r.low_freq_factor).dump());
  }
  return r;
}

DType parse_dtype(const json& j, const std::string& label) {
  for (const char* key : {"dtype", "torch_dtype"}) {
    if (!j.contains(key) || j[key].is_null()) continue;
    const std::string s = get_string(j, key, "", label);
    if (s == "bfloat16") return DType::bf16;
    if (s == "float16") return DType::f16;
    if (s == "float32") return DType::f32;
    fail(label, "unsupported " + std::string(key) + " \"" + s + "\"");
  }
  return DType::bf16;
}

}  // namespace

const char* torch_dtype_name(DType dtype) {
  switch (dtype) {
    case DType::f32: return "float32";
    case DType::f16: return "float16";
    case DType::bf16: return "bfloat16";
    default:
      throw std::invalid_argument(std::string("[config] no model dtype ") + dtype_name(dtype));
  }
}

QwenConfig QwenConfig::from_json(const json& j, const std::string& label) {
  if (!j.is_object()) fail(label, "config must be a JSON object");
  QwenConfig c;
  c.raw = j;
  c.model_type = get_string(j, "model_type", "", label);
  if (c.model_type != "qwen2" && c.model_type != "qwen3")
    fail(label, "model_type \"" + c.model_type +
                    "\" is not supported (sprig loads dense qwen2 and qwen3 models)");
  const std::string expected_arch =
      c.model_type == "qwen2" ? "Qwen2ForCausalLM" : "Qwen3ForCausalLM";
  if (j.contains("architectures")) {
    const json& archs = j["architectures"];
    if (!archs.is_array() || archs.empty() || archs[0] != expected_arch)
      fail(label, "architectures " + archs.dump() + " is not supported for model_type " +
                      c.model_type + " (expected [\"" + expected_arch + "\"])");
  }
  c.vocab_size = get_int(j, "vocab_size", label);
  if (c.vocab_size > std::numeric_limits<int32_t>::max())
    fail(label, "\"vocab_size\" " + std::to_string(c.vocab_size) +
                    " is more than 2147483647: token ids are 32-bit");
  c.hidden_size = get_int(j, "hidden_size", label);
  c.intermediate_size = get_int(j, "intermediate_size", label);
  c.num_hidden_layers = get_int(j, "num_hidden_layers", label);
  if (c.num_hidden_layers > kMaxLayers)
    fail(label, "\"num_hidden_layers\" " + std::to_string(c.num_hidden_layers) + " is more than " +
                    std::to_string(kMaxLayers));
  c.num_attention_heads = get_int(j, "num_attention_heads", label);
  c.num_key_value_heads = j.contains("num_key_value_heads")
                              ? get_int(j, "num_key_value_heads", label)
                              : c.num_attention_heads;
  if (c.num_attention_heads % c.num_key_value_heads != 0)
    fail(label, "num_attention_heads " + std::to_string(c.num_attention_heads) +
                    " is not a multiple of num_key_value_heads " +
                    std::to_string(c.num_key_value_heads));
  if (j.contains("head_dim") && !j["head_dim"].is_null()) {
    c.head_dim = get_int(j, "head_dim", label);
  } else {
    if (c.hidden_size % c.num_attention_heads != 0)
      fail(label, "hidden_size is not divisible by num_attention_heads and head_dim is not set");
    c.head_dim = c.hidden_size / c.num_attention_heads;
  }
  if (c.head_dim % 2 != 0) fail(label, "head_dim must be even for rotary embeddings");
  if (j.contains("max_position_embeddings"))
    c.max_position_embeddings = get_int(j, "max_position_embeddings", label);
  c.rms_norm_eps = get_double(j, "rms_norm_eps", 1e-6, label);
  if (!(c.rms_norm_eps > 0))
    fail(label, "rms_norm_eps must be positive, got " + std::to_string(c.rms_norm_eps));
  c.initializer_range = get_double(j, "initializer_range", 0.02, label);
  c.rope = parse_rope(j, c.max_position_embeddings, label);
  c.tie_word_embeddings = get_bool(j, "tie_word_embeddings", false, label);
  c.attention_bias = get_bool(j, "attention_bias", false, label);
  const std::string act = get_string(j, "hidden_act", "silu", label);
  if (act != "silu") fail(label, "hidden_act \"" + act + "\" is not supported (only silu)");
  c.dtype = parse_dtype(j, label);
  c.dtype_declared = is_set(j, "dtype") || is_set(j, "torch_dtype");

  // Sliding windows: explicit layer_types win; otherwise HF's rule (layers >= max_window_layers
  // slide when use_sliding_window is true).
  const bool use_sw = get_bool(j, "use_sliding_window", false, label);
  const int64_t window = j.contains("sliding_window") && j["sliding_window"].is_number_integer()
                             ? j["sliding_window"].get<int64_t>()
                             : 0;
  c.sliding_window_per_layer.assign(static_cast<size_t>(c.num_hidden_layers), 0);
  if (j.contains("layer_types") && j["layer_types"].is_array()) {
    const json& types = j["layer_types"];
    if (static_cast<int64_t>(types.size()) != c.num_hidden_layers)
      fail(label, "layer_types has " + std::to_string(types.size()) + " entries for " +
                      std::to_string(c.num_hidden_layers) + " layers");
    for (size_t i = 0; i < types.size(); ++i) {
      if (!types[i].is_string())
        fail(label, "\"layer_types\" entries must be strings, got " + types[i].dump());
      const std::string t = types[i].get<std::string>();
      if (t == "sliding_attention") {
        if (window <= 0) fail(label, "sliding_attention layers need a positive sliding_window");
        c.sliding_window_per_layer[i] = window;
      } else if (t != "full_attention") {
        fail(label, "layer type \"" + t + "\" is not supported");
      }
    }
  } else if (use_sw && window > 0) {
    int64_t first = c.num_hidden_layers;  // HF: layers from max_window_layers on slide
    if (j.contains("max_window_layers") && !j["max_window_layers"].is_null()) {
      const json& m = j["max_window_layers"];
      if (!m.is_number_integer() || m.get<int64_t>() < 0)
        fail(label, "\"max_window_layers\" must be a non-negative integer, got " + m.dump());
      first = m.get<int64_t>();
    }
    for (int64_t i = first; i < c.num_hidden_layers; ++i)
      c.sliding_window_per_layer[static_cast<size_t>(i)] = window;
  }
  return c;
}

std::vector<ParameterPart> QwenConfig::parameter_parts(bool embeddings) const {
  const auto d = [](int64_t v) { return static_cast<double>(v); };
  const auto key = [](const char* name, int64_t v) {
    return std::string(name) + " " + std::to_string(v);
  };
  const std::string layers = key("num_hidden_layers", num_hidden_layers);
  const std::string hidden = key("hidden_size", hidden_size);
  std::vector<ParameterPart> parts = {
      {d(num_hidden_layers) * d(hidden_size) * 2 * d(num_attention_heads + num_key_value_heads) *
           d(head_dim),
       "the attention: " + layers + " x " + hidden + " x 2 (" +
           key("num_attention_heads", num_attention_heads) + " + " +
           key("num_key_value_heads", num_key_value_heads) + ") x " + key("head_dim", head_dim)},
      {d(num_hidden_layers) * 3 * d(hidden_size) * d(intermediate_size),
       "the MLP: " + layers + " x 3 x " + hidden + " x " +
           key("intermediate_size", intermediate_size)},
      // Per layer its two norms, Qwen3's q/k norms, the q/k/v and o biases; the final norm.
      {d(num_hidden_layers) *
               (2 * d(hidden_size) + (has_qk_norm() ? 2 * d(head_dim) : 0) +
                (has_qkv_bias() ? d(num_attention_heads + 2 * num_key_value_heads) * d(head_dim)
                                : 0) +
                (has_o_bias() ? d(hidden_size) : 0)) +
           d(hidden_size),
       "the norms and biases"}};
  if (embeddings)
    parts.push_back({d(vocab_size) * d(hidden_size) * (tie_word_embeddings ? 1 : 2),
                     "the embedding" + std::string(tie_word_embeddings ? "" : " and head") + ": " +
                         key("vocab_size", vocab_size) + " x " + hidden});
  return parts;
}

QwenConfig QwenConfig::load(const std::string& path) {
  check_input_file(path, "a model config (config.json)");
  if (!std::ifstream(path)) fail(path, "cannot open the model config");
  return from_json(read_json_file(path), path);
}

json QwenConfig::to_json() const {
  json j = raw.is_object() ? raw : json::object();
  j["model_type"] = model_type;
  j["architectures"] = {model_type == "qwen2" ? "Qwen2ForCausalLM" : "Qwen3ForCausalLM"};
  j["vocab_size"] = vocab_size;
  j["hidden_size"] = hidden_size;
  j["intermediate_size"] = intermediate_size;
  j["num_hidden_layers"] = num_hidden_layers;
  j["num_attention_heads"] = num_attention_heads;
  j["num_key_value_heads"] = num_key_value_heads;
  if (model_type == "qwen3" || raw.contains("head_dim")) j["head_dim"] = head_dim;
  j["max_position_embeddings"] = max_position_embeddings;
  j["rms_norm_eps"] = rms_norm_eps;
  j["initializer_range"] = initializer_range;
  // Both spellings, so transformers 4 (rope_theta, rope_scaling) and 5 (rope_parameters) and the
  // serving engines read the same rotation.
  j["rope_theta"] = rope.theta;
  j["rope_parameters"] = rope.to_json();
  if (rope.type != RopeType::standard || is_set(j, "rope_scaling"))
    j["rope_scaling"] = rope.to_json();
  j["tie_word_embeddings"] = tie_word_embeddings;
  j["attention_bias"] = attention_bias;
  j["hidden_act"] = "silu";
  j["dtype"] = j["torch_dtype"] = torch_dtype_name(dtype);  // transformers 5 reads one, 4 the other
  return j;
}

}  // namespace sprig
