// QwenConfig: the fields of a Hugging Face config.json that sprig's Qwen2 / Qwen2.5 / Qwen3 dense
// layers need. Accepts both `rope_theta` / `rope_scaling` and transformers-5 `rope_parameters`
// (default, linear, dynamic, yarn and llama3 RoPE), `torch_dtype` and `dtype`, Qwen3's explicit
// `head_dim`, sliding-window layers; rejects unsupported model types, architectures and rope
// scaling with one clear sentence.
#pragma once

#include <algorithm>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "nn/rope.h"
#include "tensor/dtype.h"

namespace sprig {

// Some of a model's parameters: how many, and the config keys that size them, with their values
// ("vocab_size 64 x hidden_size 48").
struct ParameterPart {
  double count;  // a double: an absurd config must not overflow while it is measured
  std::string sizes;
};

struct QwenConfig {
  std::string model_type;  // "qwen2" or "qwen3"
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_hidden_layers = 0;
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0;
  int64_t head_dim = 0;  // Qwen3: explicit; Qwen2: hidden_size / num_attention_heads
  int64_t max_position_embeddings = 32768;
  double rms_norm_eps = 1e-6;
  RopeParameters rope;  // rope_theta and its scaling (nn/rope.h)
  double initializer_range = 0.02;
  bool tie_word_embeddings = false;
  bool attention_bias = false;  // Qwen3: q/k/v/o biases; Qwen2 always has q/k/v biases
  std::vector<int64_t> sliding_window_per_layer;  // 0 = full attention, else the window size
  // The weights' dtype: as config.json declares it (`dtype`, else `torch_dtype`; bf16 when
  // neither is set) until a writer sets what it writes; to_json writes both keys from it.
  DType dtype = DType::bf16;
  bool dtype_declared = false;  // whether config.json set `dtype` or `torch_dtype`
  nlohmann::json raw;           // the parsed file, kept so an export writes back what was read

  bool has_qk_norm() const { return model_type == "qwen3"; }
  // The window of the sliding-window layers (they all share one), 0 when every layer attends fully.
  int64_t sliding_window() const {
    int64_t w = 0;
    for (int64_t layer_window : sliding_window_per_layer) w = std::max(w, layer_window);
    return w;
  }
  // The decoder layers' attention and MLP weights and, with `embeddings`, the embedding and the
  // untied head (norms and biases are too small to matter here).
  std::vector<ParameterPart> parameter_parts(bool embeddings = true) const;
  bool has_qkv_bias() const { return model_type == "qwen2" || attention_bias; }
  bool has_o_bias() const { return model_type == "qwen3" && attention_bias; }

  // `label` (a path) prefixes every error message.
  static QwenConfig from_json(const nlohmann::json& j, const std::string& label = "config.json");
  static QwenConfig load(const std::string& path);
  // The HF config.json for this model (the original fields plus sprig's normalised values).
  nlohmann::json to_json() const;
};

// The name config.json gives a weights' dtype: "float32", "float16" or "bfloat16".
const char* torch_dtype_name(DType dtype);

}  // namespace sprig
