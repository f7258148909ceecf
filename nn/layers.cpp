#include "nn/layers.h"

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

Var QwenMLP::forward(const Var& x) const {
  return down_proj.forward(swiglu(gate_proj.forward(x), up_proj.forward(x)));
}

}  // namespace sprig
