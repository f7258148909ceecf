#include "nn/module.h"

#include <stdexcept>

namespace sprig {

void Module::register_parameter(const std::string& name, Var& param, Tensor value,
                                bool requires_grad) {
  param = Var(std::move(value), requires_grad);
  params_.emplace_back(name, &param);
}

void Module::collect(const std::string& prefix,
                     std::vector<std::pair<std::string, Var*>>& out) const {
  for (const auto& [name, p] : params_) out.emplace_back(prefix + name, p);
  for (const auto& [name, child] : children_)
    child->collect(name.empty() ? prefix : prefix + name + ".", out);
}

std::vector<std::pair<std::string, Var>> Module::named_parameters() const {
  std::vector<std::pair<std::string, Var*>> ptrs;
  collect("", ptrs);
  std::vector<std::pair<std::string, Var>> out;
  out.reserve(ptrs.size());
  for (const auto& [name, p] : ptrs) out.emplace_back(name, *p);
  return out;
}

std::vector<Var> Module::parameters() const {
  std::vector<Var> out;
  for (auto& [name, p] : named_parameters()) out.push_back(p);
  return out;
}

int64_t Module::num_parameters() const {
  int64_t n = 0;
  for (const Var& p : parameters()) n += p.numel();
  return n;
}

void Module::to(Device device, DType dtype) {
  std::vector<std::pair<std::string, Var*>> ptrs;
  collect("", ptrs);
  for (auto& [name, p] : ptrs) {
    const DType t = is_floating(p->dtype()) ? dtype : p->dtype();
    *p = Var(p->value().to(device, t), p->requires_grad());
  }
}

void Module::to(Device device) {
  std::vector<std::pair<std::string, Var*>> ptrs;
  collect("", ptrs);
  for (auto& [name, p] : ptrs) *p = Var(p->value().to(device), p->requires_grad());
}

void Module::set_requires_grad(bool requires_grad) {
  for (Var& p : parameters()) p.set_requires_grad(requires_grad);
}

void Module::zero_grad() {
  for (Var& p : parameters()) p.zero_grad();
}

void Module::train(bool training) {
  training_ = training;
  for (auto& [name, child] : children_) child->train(training);
}

std::map<std::string, Tensor> Module::state_dict() const {
  std::map<std::string, Tensor> out;
  for (const auto& [name, p] : named_parameters()) out[name] = p.value();
  return out;
}

void Module::load_state_dict(const std::map<std::string, Tensor>& state) {
  std::vector<std::pair<std::string, Var*>> ptrs;
  collect("", ptrs);
  std::string missing, mismatched, unexpected;
  std::map<std::string, bool> known;
  for (auto& [name, p] : ptrs) {
    known[name] = true;
    auto it = state.find(name);
    if (it == state.end()) {
      missing += " " + name;
    } else if (it->second.shape() != p->shape()) {
      mismatched += " " + name + " (expected " + shape_str(p->shape()) + ", got " +
                    shape_str(it->second.shape()) + ")";
    }
  }
  for (const auto& [name, t] : state)
    if (!known.count(name)) unexpected += " " + name;
  if (!missing.empty() || !mismatched.empty() || !unexpected.empty()) {
    std::string msg = "[load_state_dict]";
    if (!missing.empty()) msg += " missing:" + missing + ";";
    if (!mismatched.empty()) msg += " wrong shape:" + mismatched + ";";
    if (!unexpected.empty()) msg += " unexpected:" + unexpected + ";";
    msg.pop_back();
    throw std::invalid_argument(msg);
  }
  for (auto& [name, p] : ptrs) {
    const Tensor& src = state.at(name);
    Tensor value = src.to(p->device(), p->dtype());
    if (value.shares_storage(src)) value = value.clone();  // never alias the caller's tensor
    *p = Var(value, p->requires_grad());
  }
}

}  // namespace sprig
