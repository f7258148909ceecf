// Definitions of tensor/kernel_params.h.
#include "tensor/kernel_params.h"

#include <cmath>

namespace sprig {

const char* unary_op_name(UnaryOp op) {
  switch (op) {
    case UnaryOp::neg: return "neg";
    case UnaryOp::exp: return "exp";
    case UnaryOp::log: return "log";
    case UnaryOp::sqrt: return "sqrt";
    case UnaryOp::rsqrt: return "rsqrt";
    case UnaryOp::tanh: return "tanh";
    case UnaryOp::sigmoid: return "sigmoid";
    case UnaryOp::silu: return "silu";
    case UnaryOp::pow: return "pow";
    case UnaryOp::abs: return "abs";
  }
  return "unary";
}

const char* binary_op_name(BinaryOp op) {
  switch (op) {
    case BinaryOp::add: return "add";
    case BinaryOp::sub: return "sub";
    case BinaryOp::mul: return "mul";
    case BinaryOp::div: return "div";
  }
  return "binary";
}

AdamWScalars adamw_scalars(const AdamWParams& hp) {
  const double step = static_cast<double>(hp.step);
  return {.decay = static_cast<float>(1.0 - hp.lr * hp.weight_decay),
          .one_minus_beta1 = static_cast<float>(1.0 - hp.beta1),
          .beta2 = static_cast<float>(hp.beta2),
          .one_minus_beta2 = static_cast<float>(1.0 - hp.beta2),
          .step_size = static_cast<float>(hp.lr / (1.0 - std::pow(hp.beta1, step))),
          .bias2_sqrt = static_cast<float>(std::sqrt(1.0 - std::pow(hp.beta2, step))),
          .eps = static_cast<float>(hp.eps),
          .grad_scale = static_cast<float>(hp.grad_scale)};
}

RopeFrequencies rope_frequencies(int64_t head_dim, double theta) {
  // torch: 1.0 / (theta ** (arange(0, D, 2).float() / D)), every step in fp32 (the power is
  // evaluated in f64 and rounded, i.e. a correctly rounded fp32 pow).
  const double base = static_cast<float>(theta);
  RopeFrequencies f;
  f.inv_freq.resize(static_cast<size_t>(head_dim / 2));
  for (int64_t i = 0; i < head_dim / 2; ++i) {
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(head_dim);
    f.inv_freq[i] = 1.0f / static_cast<float>(std::pow(base, static_cast<double>(exponent)));
  }
  return f;
}

}  // namespace sprig
