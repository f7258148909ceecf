#include "nn/rope.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <vector>

namespace sprig {

namespace {

// torch's fp32 arithmetic, one rounding per operation: each step is computed in f64 and rounded,
// which for +, -, * and / of fp32 operands is the correctly rounded fp32 result (and can never be
// fused into an FMA the way fp32 expressions can).
float f32(double x) { return static_cast<float>(x); }
float mul(float a, float b) { return f32(static_cast<double>(a) * b); }
float div(float a, float b) { return f32(static_cast<double>(a) / b); }
float add(float a, float b) { return f32(static_cast<double>(a) + b); }
float sub(float a, float b) { return f32(static_cast<double>(a) - b); }

// YaRN's mscale (paper eq. 21): 0.1 * m * ln(scale) + 1, or 1 for scale <= 1.
double yarn_mscale(double scale, double m) {
  return scale <= 1 ? 1.0 : 0.1 * m * std::log(scale) + 1.0;
}

RopeFrequencies yarn(const RopeParameters& r, int64_t dim) {
  RopeFrequencies f;
  const double factor = r.factor;
  if (r.attention_factor)
    f.attention_scaling = f32(*r.attention_factor);
  else if (r.mscale.value_or(0) != 0 && r.mscale_all_dim.value_or(0) != 0)
    f.attention_scaling =
        f32(yarn_mscale(factor, *r.mscale) / yarn_mscale(factor, *r.mscale_all_dim));
  else
    f.attention_scaling = f32(yarn_mscale(factor, 1.0));
  // The dimension whose wavelength turns `rotations` times over the original context.
  const auto correction_dim = [&](double rotations) {
    return static_cast<double>(dim) *
           std::log(static_cast<double>(r.original_max_position_embeddings) /
                    (rotations * 2 * std::numbers::pi)) /
           (2 * std::log(r.theta));
  };
  double low = correction_dim(r.beta_fast), high = correction_dim(r.beta_slow);
  if (r.truncate) {
    low = std::floor(low);
    high = std::ceil(high);
  }
  low = std::max(low, 0.0);
  high = std::min(high, static_cast<double>(dim - 1));
  if (low == high) high += 0.001;  // no singular ramp
  f.inv_freq.resize(static_cast<size_t>(dim / 2));
  for (int64_t i = 0; i < dim / 2; ++i) {
    // pos_freq = theta ** (float(2i) / D) as tensor/kernel_params.cpp computes it: 1 / pos_freq
    // is the unscaled frequency (extrapolation), 1 / (factor * pos_freq) the interpolated one.
    const float pos_freq = f32(std::pow(static_cast<double>(f32(r.theta)),
                                        static_cast<double>(div(f32(2 * i), f32(dim)))));
    const float extrapolation = div(1.0f, pos_freq);
    const float interpolation = div(1.0f, mul(f32(factor), pos_freq));
    const float ramp = std::clamp(div(sub(f32(i), f32(low)), f32(high - low)), 0.0f, 1.0f);
    const float extrapolation_share = sub(1.0f, ramp);
    f.inv_freq[i] = add(mul(interpolation, sub(1.0f, extrapolation_share)),
                        mul(extrapolation, extrapolation_share));
  }
  return f;
}

RopeFrequencies llama3(const RopeParameters& r, int64_t dim) {
  RopeFrequencies f = rope_frequencies(dim, r.theta);
  const double original = static_cast<double>(r.original_max_position_embeddings);
  const float low_freq_wavelen = f32(original / r.low_freq_factor);
  const float high_freq_wavelen = f32(original / r.high_freq_factor);
  const float factor = f32(r.factor);
  for (float& inv : f.inv_freq) {
    // torch evaluates `scalar / tensor` as reciprocal(tensor) * scalar
    const float wavelen = mul(div(1.0f, inv), f32(2 * std::numbers::pi));
    if (wavelen > low_freq_wavelen) {
      inv = div(inv, factor);
    } else if (!(wavelen < high_freq_wavelen)) {  // between: a smooth blend
      const float smooth = div(sub(mul(div(1.0f, wavelen), f32(original)), f32(r.low_freq_factor)),
                               f32(r.high_freq_factor - r.low_freq_factor));
      inv = add(div(mul(sub(1.0f, smooth), inv), factor), mul(smooth, inv));
    }
  }
  return f;
}

}  // namespace

const char* rope_type_name(RopeType type) {
  switch (type) {
    case RopeType::standard: return "default";
    case RopeType::linear: return "linear";
    case RopeType::dynamic: return "dynamic";
    case RopeType::yarn: return "yarn";
    case RopeType::llama3: return "llama3";
  }
  return "default";
}

RopeFrequencies RopeParameters::frequencies(int64_t head_dim, int64_t positions_end) const {
  switch (type) {
    case RopeType::standard: return rope_frequencies(head_dim, theta);
    case RopeType::linear: {
      RopeFrequencies f = rope_frequencies(head_dim, theta);
      for (float& inv : f.inv_freq) inv = div(inv, f32(factor));
      return f;
    }
    case RopeType::dynamic: {
      if (positions_end <= max_position_embeddings) return rope_frequencies(head_dim, theta);
      // base * ((factor * L / max) - (factor - 1)) ** (D / (D - 2)), on fp32 tensors
      const float length = f32(static_cast<double>(positions_end));
      const float ratio =
          sub(div(mul(f32(factor), length), f32(static_cast<double>(max_position_embeddings))),
              f32(factor - 1));
      const float grown =
          f32(std::pow(static_cast<double>(ratio),
                       static_cast<double>(head_dim) / static_cast<double>(head_dim - 2)));
      return rope_frequencies(head_dim, mul(f32(theta), grown));
    }
    case RopeType::yarn: return yarn(*this, head_dim);
    case RopeType::llama3: return llama3(*this, head_dim);
  }
  return rope_frequencies(head_dim, theta);
}

nlohmann::json RopeParameters::to_json() const {
  nlohmann::json j = {{"rope_type", rope_type_name(type)}, {"rope_theta", theta}};
  if (type == RopeType::standard) return j;
  j["factor"] = factor;
  if (type == RopeType::yarn || type == RopeType::llama3)
    j["original_max_position_embeddings"] = original_max_position_embeddings;
  if (type == RopeType::yarn) {
    if (attention_factor) j["attention_factor"] = *attention_factor;
    if (mscale) j["mscale"] = *mscale;
    if (mscale_all_dim) j["mscale_all_dim"] = *mscale_all_dim;
    j["beta_fast"] = beta_fast;
    j["beta_slow"] = beta_slow;
    j["truncate"] = truncate;
  }
  if (type == RopeType::llama3) {
    j["low_freq_factor"] = low_freq_factor;
    j["high_freq_factor"] = high_freq_factor;
  }
  return j;
}

}  // namespace sprig
