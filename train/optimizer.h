// AdamW over a model's trainable parameters with fp32 master weights and moments. When the model
// computes in bf16 (GPU), the optimizer owns the fp32 masters and writes the bf16 compute copy
// after every step; in fp32 the parameter itself is the master.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "autograd/var.h"
#include "tensor/ops.h"

namespace sprig {

struct AdamWConfig {
  double lr = 1e-4, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.0;
};

class AdamW {
 public:
  // `params`: (name, Var) of every trainable parameter. `masters` (by name, f32) gives the fp32
  // start values of parameters that compute in a 16-bit dtype (taken before the cast, so nothing
  // is lost); an f32 parameter without a master entry is its own master.
  AdamW(std::vector<std::pair<std::string, Var>> params, AdamWConfig config,
        const std::map<std::string, Tensor>& masters = {});

  // One update with learning rate `lr` from the accumulated gradients, each multiplied by
  // `grad_scale` as it is read (normalisation and clipping without a pass of their own);
  // parameters without a gradient are left alone. Counts the update (its bias correction uses the
  // count).
  void step(double lr, double grad_scale = 1.0);
  int64_t steps_taken() const { return steps_; }

  // The gradients of every parameter (undefined ones skipped), for norms and clipping.
  std::vector<Tensor> grads() const;

  // The fp32 master weights by parameter name (what a checkpoint saves as the model).
  std::map<std::string, Tensor> masters() const;
  // The moments by "<param>.exp_avg" / "<param>.exp_avg_sq".
  std::map<std::string, Tensor> moments() const;
  // Restores masters, moments and the update count (the compute copies are refreshed).
  void load_state(const std::map<std::string, Tensor>& masters,
                  const std::map<std::string, Tensor>& moments, int64_t steps);

 private:
  struct Slot {
    std::string name;
    Var param;
    Tensor master, exp_avg, exp_avg_sq;  // fp32, on the parameter's device
  };
  std::vector<Slot> slots_;
  AdamWConfig config_;
  int64_t steps_ = 0;
};

}  // namespace sprig
