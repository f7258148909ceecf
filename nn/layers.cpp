#include "nn/layers.h"

#include <cmath>
#include <stdexcept>
#include <string>

#include "autograd/functions.h"

namespace sprig {

Linear::Linear(int64_t in_features, int64_t out_features, bool has_bias, double init_std,
               Generator& gen) {
  register_parameter(
      "weight", weight,
      normal({out_features, in_features}, 0.0, init_std, DType::f32, Device::cpu(), gen));
  if (has_bias) register_parameter("bias", bias, Tensor::zeros({out_features}));
}

Var Linear::forward(const Var& x) const {
  const int64_t in = weight.size(1);
  Shape out_shape = x.shape();
  out_shape.back() = weight.size(0);
  Var y = matmul(reshape(x, {-1, in}), weight, false, true);
  if (bias.defined()) y = y + bias;
  return reshape(y, out_shape);
}

Embedding::Embedding(int64_t num_embeddings, int64_t dim, double init_std, Generator& gen) {
  register_parameter("weight", weight,
                     normal({num_embeddings, dim}, 0.0, init_std, DType::f32, Device::cpu(), gen));
}

RMSNorm::RMSNorm(int64_t dim, double eps_) : eps(eps_) {
  register_parameter("weight", weight, Tensor::ones({dim}));
}

QwenMLP::QwenMLP(int64_t hidden, int64_t intermediate, double init_std, Generator& gen)
    : gate_proj(register_module(
          "gate_proj", std::make_unique<Linear>(hidden, intermediate, false, init_std, gen))),
      up_proj(register_module(
          "up_proj", std::make_unique<Linear>(hidden, intermediate, false, init_std, gen))),
      down_proj(register_module(
          "down_proj", std::make_unique<Linear>(intermediate, hidden, false, init_std, gen))) {}

Tensor GRU::step(const Tensor& x, const Tensor& h) const {
  return gru_cell(matmul(x, weight_ih_l0.value(), false, true),
                  matmul(h, weight_hh_l0.value(), false, true), h)
      .h;
}

GRU::GRU(int64_t input_size, int64_t hidden_size_, Generator& gen) : hidden_size(hidden_size_) {
  if (input_size < 1 || hidden_size < 1)
    throw std::invalid_argument("[GRU] input_size and hidden_size must be positive, got " +
                                std::to_string(input_size) + " and " + std::to_string(hidden_size));
  const double k = 1.0 / std::sqrt(static_cast<double>(hidden_size));
  register_parameter("weight_ih_l0", weight_ih_l0,
                     uniform({3 * hidden_size, input_size}, -k, k, DType::f32, Device::cpu(), gen));
  register_parameter(
      "weight_hh_l0", weight_hh_l0,
      uniform({3 * hidden_size, hidden_size}, -k, k, DType::f32, Device::cpu(), gen));
}

Var QwenMLP::forward(const Var& x) const {
  return down_proj.forward(swiglu(gate_proj.forward(x), up_proj.forward(x)));
}

}  // namespace sprig
