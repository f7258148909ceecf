// Var: what nn code computes with. A Tensor value, the gradient of a leaf, and the graph node that
// produced it; the backward engine; the grad-mode guards.
//
// The graph: a differentiable function (autograd/functions.h) computes its value with raw ops and
// calls `record`, which links a GradNode to the nodes of its inputs with a backward closure mapping
// the output gradient to one gradient per input. A leaf that requires grad has a leaf GradNode
// holding its accumulated gradient. `backward()` runs every reachable node once in reverse
// topological order (iteratively, so graphs of any depth work), sums fan-out gradients, accumulates
// (`+=`) into the leaves' gradients in the leaf's dtype, and frees the graph: each node drops its
// closure (and with it the tensors saved for backward) once it has run.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "tensor/tensor.h"

namespace sprig {

// Maps the gradient of a function's output to one gradient per input, in input order (an
// undefined Tensor where an input gets none). Each gradient has its input's shape; it is
// converted to its input's dtype.
using Grads = std::vector<Tensor>;
using BackwardFn = std::function<Grads(const Tensor& grad_out)>;

struct GradNode;

class Var {
 public:
  Var() = default;  // undefined
  explicit Var(Tensor value, bool requires_grad = false);

  bool defined() const { return impl_ != nullptr; }
  const Tensor& value() const;
  // The accumulated gradient of a leaf (undefined until a backward reaches it). Only leaves keep
  // gradients; intermediate results have none.
  const Tensor& grad() const;
  bool requires_grad() const;
  bool is_leaf() const;
  // Leaves only: turning it off drops the gradient.
  void set_requires_grad(bool requires_grad);
  // Drops the gradient (the next backward starts it afresh), or zeroes a grad buffer in place.
  void zero_grad();
  // Leaves that require grad only. The gradient accumulates into `buffer` (zeroed now; same shape
  // and dtype as the value, e.g. a view into a flat all-reduce bucket) and stays defined.
  void set_grad_buffer(const Tensor& buffer);
  // Leaves that require grad only: `hook` runs each time a backward that reaches this leaf has
  // added its contribution (or found it has none), so the gradient is final for that backward.
  void set_grad_hook(std::function<void()> hook);
  Var detach() const;  // same value (shared storage), no graph, no gradient

  // Backpropagates from this Var. `seed` is the gradient of this Var; it may be omitted for a
  // one-element value (then it is 1). Throws if the graph was already freed by a backward.
  void backward(const Tensor& seed = {}) const;

  const Shape& shape() const { return value().shape(); }
  int64_t dim() const { return value().dim(); }
  int64_t size(int64_t d) const { return value().size(d); }
  int64_t numel() const { return value().numel(); }
  DType dtype() const { return value().dtype(); }
  Device device() const { return value().device(); }

 private:
  friend Var record(const char* op, Tensor value, const std::vector<Var>& inputs,
                    BackwardFn backward);
  friend Grads grad(const Var& out, const Tensor& seed, const std::vector<Var>& leaves);
  struct Impl {
    Tensor value;
    std::shared_ptr<GradNode> node;  // null for constants (no grad required)
  };
  std::shared_ptr<Impl> impl_;
};

// The result of the differentiable function `op`: a Var holding `value`, linked to `inputs` by
// `backward` when grad mode is on and some input requires grad; otherwise a constant Var.
// `backward` captures the Tensors it needs, never Vars (a Var would keep its graph alive).
Var record(const char* op, Tensor value, const std::vector<Var>& inputs, BackwardFn backward);

// The gradients of `out` (seeded with `seed`, of out's shape) with respect to `leaves`, in their
// order, without touching any leaf: nothing accumulates and no grad hook runs (an undefined Tensor
// for a leaf the backward does not reach or that needs no gradient). Frees out's graph as
// backward() does. Throws "[grad] ..." when the graph reaches a leaf that requires grad and is not
// listed. Activation checkpointing (autograd/checkpoint.h) backpropagates its recomputed segments
// with it.
Grads grad(const Var& out, const Tensor& seed, const std::vector<Var>& leaves);

// Whether a function with these inputs will record a node (lets functions skip forward work that
// only backward needs).
bool needs_grad(const std::vector<Var>& inputs);

// Gradient mode: on by default, per thread.
bool grad_enabled();

// Sets gradient mode for its scope (nestable: restores the previous mode on exit).
class GradModeGuard {
 public:
  explicit GradModeGuard(bool enabled);
  ~GradModeGuard();
  GradModeGuard(const GradModeGuard&) = delete;
  GradModeGuard& operator=(const GradModeGuard&) = delete;

 private:
  bool previous_;
};

// Turns graph building off for its scope.
class NoGradGuard : public GradModeGuard {
 public:
  NoGradGuard() : GradModeGuard(false) {}
};

}  // namespace sprig
