// Basic layers: Linear (optional bias), Embedding, RMSNorm (HF numerics, docs/semantics.md §6.1),
// the SwiGLU MLP of Qwen and a GRU. Weights are initialised like Hugging Face (normal(0, std) for
// Linear and Embedding, zeros for biases, ones for norms) or, for the GRU, like PyTorch, from an
// explicit Generator, so models are seeded.
#pragma once

#include "autograd/functions.h"
#include "nn/module.h"
#include "tensor/random.h"

namespace sprig {

// y = x @ W^T (+ b); x [..., in] -> [..., out]; weight [out, in].
class Linear : public Module {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias, double init_std, Generator& gen);
  Var forward(const Var& x) const;

  Var weight, bias;  // bias undefined when absent
};

class Embedding : public Module {
 public:
  Embedding(int64_t num_embeddings, int64_t dim, double init_std, Generator& gen);
  Var forward(const Tensor& ids) const { return embedding(weight, ids); }

  Var weight;  // [V, H]
};

class RMSNorm : public Module {
 public:
  RMSNorm(int64_t dim, double eps);
  Var forward(const Var& x) const { return rms_norm(x, weight, eps); }

  Var weight;  // [dim]
  double eps;
};

// down(silu(gate(x)) * up(x)), no biases.
class QwenMLP : public Module {
 public:
  QwenMLP(int64_t hidden, int64_t intermediate, double init_std, Generator& gen);
  Var forward(const Var& x) const;

  Linear &gate_proj, &up_proj, &down_proj;
};

// PyTorch's nn.GRU(input_size, hidden_size, bias=False, batch_first=True), one layer, h0 = 0:
// x [R, T, input_size] -> every hidden state, [R, T, hidden_size] (gru in autograd/functions.h).
// Parameters have PyTorch's state-dict names; both are drawn from uniform(-k, k), k = 1/sqrt(G),
// as PyTorch initialises them.
class GRU : public Module {
 public:
  GRU(int64_t input_size, int64_t hidden_size, Generator& gen);
  Var forward(const Var& x) const { return gru(x, weight_ih_l0, weight_hh_l0); }
  // One step without a graph: the state after x [R, input_size] from state h [R, hidden_size].
  Tensor step(const Tensor& x, const Tensor& h) const;

  Var weight_ih_l0, weight_hh_l0;  // [3G, input_size], [3G, G]; row blocks r, z, n
  int64_t hidden_size;
};

}  // namespace sprig
