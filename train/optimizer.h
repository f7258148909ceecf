// AdamW over a model's trainable parameters with fp32 master weights and moments. When the model
// computes in bf16 (GPU), the optimizer owns the fp32 masters and writes the bf16 compute copy
// after every step; in fp32 the parameter itself is the master. Optimizer is what the trainer
// sees: AdamW keeps the whole state on every rank, ShardedAdamW (train/sharded_optimizer.h) each
// rank's share of it.
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

class Optimizer {
 public:
  explicit Optimizer(AdamWConfig config) : config_(config) {}
  virtual ~Optimizer() = default;

  // One update with learning rate `lr` from the accumulated gradients, each multiplied by
  // `grad_scale` as it is read (normalisation and clipping without a pass of their own). Counts
  // the update (its bias correction uses the count).
  virtual void step(double lr, double grad_scale = 1.0) = 0;
  int64_t steps_taken() const { return steps_; }

  // The global L2 norm of the gradients the update reads, the same on every rank.
  virtual double grad_norm() const = 0;
  // The fp32 master weights by parameter name, whole (what a checkpoint saves as the model).
  // Collective when they are sharded.
  virtual std::map<std::string, Tensor> masters() const = 0;
  // The first parameter (in the order given) whose master holds a non-finite value, or "": the
  // same on every rank (collective when they are sharded).
  virtual std::string first_non_finite() const = 0;
  // The moments this rank keeps, by name (what its checkpoint's optimizer file holds).
  virtual std::map<std::string, Tensor> moments() const = 0;
  // Restores masters (whole, as masters() gives them), moments (as moments() names them) and the
  // update count; the compute copies are refreshed.
  virtual void load_state(const std::map<std::string, Tensor>& masters,
                          const std::map<std::string, Tensor>& moments, int64_t steps) = 0;

 protected:
  // Counts an update and returns its hyperparameters.
  AdamWParams next_update(double lr, double grad_scale);

  AdamWConfig config_;
  int64_t steps_ = 0;
};

class AdamW : public Optimizer {
 public:
  // `params`: (name, Var) of every trainable parameter. `masters` (by name, f32) gives the fp32
  // start values of parameters that compute in a 16-bit dtype (taken before the cast, so nothing
  // is lost); an f32 parameter without a master entry is its own master.
  AdamW(std::vector<std::pair<std::string, Var>> params, AdamWConfig config,
        const std::map<std::string, Tensor>& masters = {});

  // Parameters without a gradient are left alone.
  void step(double lr, double grad_scale = 1.0) override;
  double grad_norm() const override;
  std::map<std::string, Tensor> masters() const override;
  std::string first_non_finite() const override;
  // By "<param>.exp_avg" / "<param>.exp_avg_sq".
  std::map<std::string, Tensor> moments() const override;
  void load_state(const std::map<std::string, Tensor>& masters,
                  const std::map<std::string, Tensor>& moments, int64_t steps) override;

 private:
  struct Slot {
    std::string name;
    Var param;
    Tensor master, exp_avg, exp_avg_sq;  // fp32, on the parameter's device
  };
  std::vector<Slot> slots_;
};

// Whether every value of `t` is finite, computed on its device.
bool all_finite(const Tensor& t);

// Copies `from[key]` into `dst`; throws std::runtime_error naming the key when it is missing or
// has another shape.
void restore_tensor(const std::map<std::string, Tensor>& from, const std::string& key,
                    const Tensor& dst);

}  // namespace sprig
