#include "train/optimizer.h"

#include <cmath>
#include <stdexcept>

namespace sprig {

AdamW::AdamW(std::vector<std::pair<std::string, Var>> params, AdamWConfig config,
             const std::map<std::string, Tensor>& masters)
    : Optimizer(config) {
  for (auto& [name, p] : params) {
    Slot s{name, p, {}, {}, {}};
    auto it = masters.find(name);
    if (it != masters.end()) {
      s.master = it->second.to(p.device(), DType::f32).clone();
    } else if (p.dtype() == DType::f32) {
      s.master = p.value();
    } else {
      throw std::invalid_argument("[AdamW] parameter " + name + " is " + dtype_name(p.dtype()) +
                                  " and has no fp32 master");
    }
    s.exp_avg = Tensor::zeros(p.shape(), DType::f32, p.device());
    s.exp_avg_sq = Tensor::zeros(p.shape(), DType::f32, p.device());
    slots_.push_back(std::move(s));
  }
}

AdamWParams Optimizer::next_update(double lr, double grad_scale) {
  ++steps_;
  return {.lr = lr,
          .beta1 = config_.beta1,
          .beta2 = config_.beta2,
          .eps = config_.eps,
          .weight_decay = config_.weight_decay,
          .step = steps_,
          .grad_scale = grad_scale};
}

void AdamW::step(double lr, double grad_scale) {
  const AdamWParams hp = next_update(lr, grad_scale);
  for (Slot& s : slots_) {
    if (!s.param.grad().defined()) continue;
    const Tensor copy = s.master.shares_storage(s.param.value()) ? Tensor() : s.param.value();
    adamw_step(s.master, s.param.grad(), s.exp_avg, s.exp_avg_sq, hp, copy);
  }
}

double AdamW::grad_norm() const {
  std::vector<Tensor> grads;
  for (const Slot& s : slots_)
    if (s.param.grad().defined()) grads.push_back(s.param.grad());
  return global_norm(grads);
}

std::map<std::string, Tensor> AdamW::masters() const {
  std::map<std::string, Tensor> out;
  for (const Slot& s : slots_) out[s.name] = s.master;
  return out;
}

std::string AdamW::first_non_finite() const {
  for (const Slot& s : slots_)
    if (!all_finite(s.master)) return s.name;
  return "";
}

// finite * 0 is 0 and inf or NaN * 0 is NaN, so the sum of squares of t * 0 is NaN exactly when t
// holds a non-finite value (and, unlike t's own, cannot overflow).
bool all_finite(const Tensor& t) {
  return !std::isnan(global_norm({binary_scalar(BinaryOp::mul, t, 0.0)}));
}

std::map<std::string, Tensor> AdamW::moments() const {
  std::map<std::string, Tensor> out;
  for (const Slot& s : slots_) {
    out[s.name + ".exp_avg"] = s.exp_avg;
    out[s.name + ".exp_avg_sq"] = s.exp_avg_sq;
  }
  return out;
}

void restore_tensor(const std::map<std::string, Tensor>& from, const std::string& key,
                    const Tensor& dst) {
  auto it = from.find(key);
  if (it == from.end()) throw std::runtime_error("the checkpoint has no \"" + key + "\"");
  if (it->second.shape() != dst.shape())
    throw std::runtime_error("the checkpoint's \"" + key + "\" has shape " +
                             shape_str(it->second.shape()) + ", expected " +
                             shape_str(dst.shape()));
  dst.copy_(it->second);
}

void AdamW::load_state(const std::map<std::string, Tensor>& masters,
                       const std::map<std::string, Tensor>& moments, int64_t steps) {
  for (Slot& s : slots_) {
    restore_tensor(masters, s.name, s.master);
    restore_tensor(moments, s.name + ".exp_avg", s.exp_avg);
    restore_tensor(moments, s.name + ".exp_avg_sq", s.exp_avg_sq);
    if (!s.master.shares_storage(s.param.value())) s.param.value().copy_(s.master);
  }
  steps_ = steps;
}

}  // namespace sprig
