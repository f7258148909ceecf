// Module: a tree of named parameters (Vars) and children, with Hugging Face names ("model.layers.0.
// self_attn.q_proj.weight"), device/dtype moves, train/eval mode and state dicts. Parameters are
// Var members of the concrete module, registered once in its constructor (modules are created by
// std::make_unique and never move afterwards, so the registered pointers stay valid).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "autograd/var.h"

namespace sprig {

class Module {
 public:
  Module() = default;
  virtual ~Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  // Every parameter with its full dotted name, in registration order (depth first).
  std::vector<std::pair<std::string, Var>> named_parameters() const;
  std::vector<Var> parameters() const;
  int64_t num_parameters() const;

  // Moves every parameter to `device` and floating parameters to `dtype` (requires_grad kept).
  void to(Device device, DType dtype);
  void to(Device device);
  void set_requires_grad(bool requires_grad);
  void zero_grad();
  void train(bool training = true);
  bool is_training() const { return training_; }

  std::map<std::string, Tensor> state_dict() const;
  // Copies values by name (converted to each parameter's dtype and device). Shape mismatches,
  // missing and unexpected names are all listed in one std::invalid_argument.
  void load_state_dict(const std::map<std::string, Tensor>& state);

 protected:
  // Registers `param` (a member of the derived module) holding `value`.
  void register_parameter(const std::string& name, Var& param, Tensor value,
                          bool requires_grad = true);
  // Registers a child module; an empty `name` names its parameters as this module's own (a part
  // built elsewhere, e.g. a draft's head, in its parent's serving layout).
  template <class M> M& register_module(const std::string& name, std::unique_ptr<M> child) {
    M& ref = *child;
    children_.emplace_back(name, std::move(child));
    return ref;
  }

 private:
  void collect(const std::string& prefix, std::vector<std::pair<std::string, Var*>>& out) const;

  std::vector<std::pair<std::string, Var*>> params_;
  std::vector<std::pair<std::string, std::unique_ptr<Module>>> children_;
  bool training_ = true;
};

}  // namespace sprig
