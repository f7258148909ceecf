// The enums, parameter structs and host-computed constants shared by the ops (tensor/ops.h) and
// the kernels of both devices (tensor/cpu/kernels.h, tensor/cuda/kernels.h), defined once.
#pragma once

#include <cstdint>
#include <vector>

namespace sprig {

enum class UnaryOp { neg, exp, log, sqrt, rsqrt, tanh, sigmoid, silu, pow, abs };
enum class BinaryOp { add, sub, mul, div };
enum class ReduceOp { sum, mean, max, logsumexp };
const char* unary_op_name(UnaryOp op);    // "neg", ...
const char* binary_op_name(BinaryOp op);  // "add", ...

struct AdamWParams {
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.0;
  int64_t step = 1;  // 1-based step number used for bias correction
  // Every gradient is multiplied by this before the update: the loss normalisation and the
  // clipping coefficient applied in the update's own pass instead of a pass of their own.
  double grad_scale = 1.0;
};

// The per-step constants both devices' AdamW kernels derive from AdamWParams (in f64, then f32),
// so they update by exactly the same numbers.
struct AdamWScalars {
  float decay;  // 1 - lr * weight_decay
  float one_minus_beta1, beta2, one_minus_beta2;
  float step_size;   // lr / (1 - beta1^step)
  float bias2_sqrt;  // sqrt(1 - beta2^step)
  float eps;
  float grad_scale;
};
AdamWScalars adamw_scalars(const AdamWParams& hp);

// A rotary embedding's angles and scale, computed on the host for both devices so they rotate by
// the same numbers: pair i of a head (D / 2 pairs) turns by float(position) * inv_freq[i], and its
// fp32 cos and sin are multiplied by attention_scaling before they are rounded to the activation
// dtype, as HF does (YaRN's attention factor; 1 for every other RoPE type). nn/rope.h computes
// the scaled types.
struct RopeFrequencies {
  std::vector<float> inv_freq;
  float attention_scaling = 1.0f;
};
// HF's default (unscaled) frequencies: inv_freq[i] = 1 / theta^(float(2i) / D) in fp32.
RopeFrequencies rope_frequencies(int64_t head_dim, double theta);

}  // namespace sprig
