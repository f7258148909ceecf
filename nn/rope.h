// RoPE scaling: the rotary embedding's parameters as a Hugging Face config.json gives them
// (`rope_parameters` or `rope_scaling`, with `rope_theta`) and the frequencies each type rotates
// by, computed as transformers computes them, every step rounded to fp32 where it rounds
// (docs/semantics.md §6.3). Types: default, linear (positions divided by `factor`), dynamic (NTK:
// the base grows with the length once a forward's positions pass max_position_embeddings), yarn
// (per-frequency blend of interpolation and extrapolation, cos/sin scaled by the attention
// factor) and llama3 (low frequencies divided by `factor`, a smooth band between).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "tensor/kernel_params.h"

namespace sprig {

enum class RopeType { standard, linear, dynamic, yarn, llama3 };
const char* rope_type_name(RopeType type);  // HF's rope_type: "default", "linear", ...

struct RopeParameters {
  RopeType type = RopeType::standard;
  double theta = 10000.0;
  double factor = 1.0;  // every type but default
  // dynamic: the length past which the base grows (the model's max_position_embeddings)
  int64_t max_position_embeddings = 0;
  // yarn and llama3: the context length of pre-training
  int64_t original_max_position_embeddings = 0;
  // yarn: cos/sin scale (absent: from factor, or mscale / mscale_all_dim), ramp bounds
  std::optional<double> attention_factor, mscale, mscale_all_dim;
  double beta_fast = 32.0, beta_slow = 1.0;
  bool truncate = true;
  // llama3: the wavelengths original / low_freq_factor and original / high_freq_factor bound
  // the smooth band
  double low_freq_factor = 1.0, high_freq_factor = 4.0;

  // Whether the frequencies depend on the positions a forward rotates (dynamic).
  bool depends_on_length() const { return type == RopeType::dynamic; }
  // The frequencies of a forward whose largest position is positions_end - 1 (ignored unless
  // depends_on_length(); transformers' dynamic type keeps the longest length it has seen, sprig
  // takes each forward's own, which equals transformers on every fresh model and every decoding
  // that only grows).
  RopeFrequencies frequencies(int64_t head_dim, int64_t positions_end = 0) const;
  // HF's rope_parameters object: rope_type, rope_theta and the type's own keys.
  nlohmann::json to_json() const;
};

}  // namespace sprig
