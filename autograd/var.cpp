// Var, graph nodes, the backward engine and grad mode.
#include "autograd/var.h"

#include <stdexcept>
#include <string>
#include <unordered_map>

#include "tensor/ops.h"

namespace sprig {

// One node of the graph. A function node has inputs and a backward closure (both dropped once it
// has run); a leaf node has neither and accumulates its Var's gradient.
struct GradNode {
  struct Edge {
    std::shared_ptr<GradNode> node;  // null when the input needs no gradient
    Shape shape;                     // the input's shape and dtype, which its gradient must have
    DType dtype;
  };
  const char* op = "leaf";
  bool leaf = false;
  bool released = false;  // set once backward has run through this node
  std::vector<Edge> inputs;
  BackwardFn backward;
  Tensor grad;                     // leaves: the accumulated gradient
  bool buffered = false;           // leaves: `grad` is a buffer the owner gave, zeroed in place
  std::function<void()> on_ready;  // leaves: called once a backward is done with the leaf

  GradNode() = default;
  GradNode(const GradNode&) = delete;
  GradNode& operator=(const GradNode&) = delete;
  // Frees the chain of input nodes iteratively: a deep graph dropped without backward would
  // otherwise recurse once per node and overflow the stack.
  ~GradNode() {
    std::vector<std::shared_ptr<GradNode>> pending;
    for (Edge& e : inputs) pending.push_back(std::move(e.node));
    while (!pending.empty()) {
      std::shared_ptr<GradNode> n = std::move(pending.back());
      pending.pop_back();
      if (n && n.use_count() == 1) {
        for (Edge& e : n->inputs) pending.push_back(std::move(e.node));
        n->inputs.clear();
      }
    }
  }
};

namespace {

thread_local bool grad_mode = true;

const Tensor& undefined_tensor() {
  static const Tensor t;
  return t;
}

[[noreturn]] void fail(const char* op, const std::string& msg) {
  throw std::invalid_argument(std::string("[") + op + "] " + msg);
}

std::shared_ptr<GradNode> make_leaf_node() {
  auto node = std::make_shared<GradNode>();
  node->leaf = true;
  return node;
}

// Per-node state of one backward pass.
struct Pending {
  std::shared_ptr<GradNode> node;  // keeps the node alive while its consumers release their edges
  int consumers = 0;               // consumers whose gradient has not arrived yet
  Tensor grad;                     // the sum of the gradients received so far
};

// Finds every node reachable from `root` and counts, for each, the edges that point to it.
std::unordered_map<GradNode*, Pending> discover(const std::shared_ptr<GradNode>& root) {
  std::unordered_map<GradNode*, Pending> state;
  state[root.get()].node = root;
  std::vector<GradNode*> stack{root.get()};
  while (!stack.empty()) {
    GradNode* n = stack.back();
    stack.pop_back();
    if (n->released)
      throw std::runtime_error(std::string("[backward] the graph through '") + n->op +
                               "' was freed by an earlier backward(); run the forward again");
    for (const GradNode::Edge& e : n->inputs) {
      if (!e.node) continue;
      auto [it, fresh] = state.try_emplace(e.node.get());
      ++it->second.consumers;
      if (fresh) {
        it->second.node = e.node;
        stack.push_back(e.node.get());
      }
    }
  }
  return state;
}

// Checks a gradient returned by `n`'s backward for input `i` against that input, and converts
// it to the input's dtype.
Tensor checked_grad(const GradNode& n, size_t i, Tensor g) {
  const GradNode::Edge& e = n.inputs[i];
  if (g.shape() != e.shape)
    fail("backward", std::string("'") + n.op + "' returned a gradient of shape " +
                         shape_str(g.shape()) + " for input " + std::to_string(i) + " of shape " +
                         shape_str(e.shape));
  return g.to(e.dtype);
}

void accumulate_leaf(GradNode& leaf, const Tensor& g) {
  if (!leaf.grad.defined())
    leaf.grad = g.clone();  // a fresh tensor: g may alias other gradients
  else
    leaf.grad.copy_(add(leaf.grad, g));
}

// Runs backward through every node reachable from `root`, each after all its consumers (Kahn's
// algorithm), releasing each function node once it has run. A leaf's gradient is accumulated and
// its hook run, or with `captured` stored there instead.
void run_backward(const std::shared_ptr<GradNode>& root, const Tensor& seed,
                  std::unordered_map<GradNode*, Tensor>* captured = nullptr) {
  std::unordered_map<GradNode*, Pending> state = discover(root);
  state[root.get()].grad = seed;
  std::vector<GradNode*> ready{root.get()};
  while (!ready.empty()) {
    GradNode* n = ready.back();
    ready.pop_back();
    const Tensor g = std::move(state[n].grad);
    if (n->leaf && captured) {
      (*captured)[n] = g;
      continue;
    }
    if (n->leaf) {
      if (g.defined()) accumulate_leaf(*n, g);
      if (n->on_ready) n->on_ready();
      continue;
    }
    std::vector<Tensor> grads;
    if (g.defined()) {
      grads = n->backward(g);
      if (grads.size() != n->inputs.size())
        fail("backward", std::string("'") + n->op + "' returned " + std::to_string(grads.size()) +
                             " gradients for " + std::to_string(n->inputs.size()) + " inputs");
    }
    for (size_t i = 0; i < n->inputs.size(); ++i) {
      GradNode* in = n->inputs[i].node.get();
      if (!in) continue;
      Pending& p = state[in];
      if (i < grads.size() && grads[i].defined()) {
        Tensor gi = checked_grad(*n, i, std::move(grads[i]));
        p.grad = p.grad.defined() ? add(p.grad, gi) : std::move(gi);
      }
      if (--p.consumers == 0) ready.push_back(in);
    }
    n->backward = nullptr;
    n->inputs.clear();
    n->released = true;
  }
}

}  // namespace

// ---- Var ----------------------------------------------------------------------------------------

Var::Var(Tensor value, bool requires_grad) {
  if (!value.defined()) fail("Var", "value is undefined");
  impl_ = std::make_shared<Impl>(Impl{std::move(value), nullptr});
  set_requires_grad(requires_grad);
}

const Tensor& Var::value() const {
  if (!impl_) fail("Var", "undefined Var");
  return impl_->value;
}

const Tensor& Var::grad() const {
  return impl_ && impl_->node && impl_->node->leaf ? impl_->node->grad : undefined_tensor();
}

bool Var::requires_grad() const { return impl_ && impl_->node; }

bool Var::is_leaf() const { return !impl_ || !impl_->node || impl_->node->leaf; }

void Var::set_requires_grad(bool requires_grad) {
  if (!impl_) fail("set_requires_grad", "undefined Var");
  if (!is_leaf())
    fail("set_requires_grad", std::string("only leaves can change requires_grad; this Var is ") +
                                  "the result of '" + impl_->node->op + "' (use detach())");
  if (requires_grad && !is_floating(impl_->value.dtype()))
    fail("set_requires_grad", std::string("only floating tensors can require grad, got ") +
                                  dtype_name(impl_->value.dtype()));
  if (!requires_grad)
    impl_->node = nullptr;
  else if (!impl_->node)
    impl_->node = make_leaf_node();
}

void Var::zero_grad() {
  if (!impl_ || !impl_->node || !impl_->node->leaf) return;
  GradNode& leaf = *impl_->node;
  if (leaf.buffered)
    leaf.grad.fill_(0.0);
  else
    leaf.grad = Tensor();
}

void Var::set_grad_buffer(const Tensor& buffer) {
  if (!requires_grad() || !is_leaf()) fail("set_grad_buffer", "needs a leaf that requires grad");
  if (buffer.shape() != shape() || buffer.dtype() != dtype() || buffer.device() != device())
    fail("set_grad_buffer", "a buffer of shape " + shape_str(buffer.shape()) + " " +
                                dtype_name(buffer.dtype()) + " on " + buffer.device().str() +
                                " for a " + shape_str(shape()) + " " + dtype_name(dtype()) +
                                " parameter on " + device().str());
  GradNode& leaf = *impl_->node;
  leaf.grad = buffer;
  leaf.buffered = true;
  zero_grad();
}

void Var::set_grad_hook(std::function<void()> hook) {
  if (!requires_grad() || !is_leaf()) fail("set_grad_hook", "needs a leaf that requires grad");
  impl_->node->on_ready = std::move(hook);
}

Var Var::detach() const { return Var(value()); }

void Var::backward(const Tensor& seed) const {
  if (!requires_grad())
    fail("backward", "this Var does not require grad (no input of its graph requires grad)");
  const Tensor& v = value();
  Tensor g = seed;
  if (!g.defined()) {
    if (v.numel() != 1)
      fail("backward", "a seed gradient is required for a value of shape " + shape_str(v.shape()));
    g = Tensor::ones(v.shape(), v.dtype(), v.device());
  } else if (g.shape() != v.shape()) {
    fail("backward", "seed shape " + shape_str(g.shape()) + " does not match value shape " +
                         shape_str(v.shape()));
  }
  run_backward(impl_->node, g.to(v.device(), v.dtype()));
}

Grads grad(const Var& out, const Tensor& seed, const std::vector<Var>& leaves) {
  if (!out.requires_grad()) return Grads(leaves.size());
  if (seed.shape() != out.shape())
    fail("grad", "seed shape " + shape_str(seed.shape()) + " does not match value shape " +
                     shape_str(out.shape()));
  std::unordered_map<GradNode*, Tensor> captured;
  run_backward(out.impl_->node, seed.to(out.device(), out.dtype()), &captured);
  Grads grads;
  for (const Var& leaf : leaves) {
    const auto it = leaf.requires_grad() ? captured.find(leaf.impl_->node.get()) : captured.end();
    grads.push_back(it == captured.end() ? Tensor() : it->second);
    if (it != captured.end()) captured.erase(it);
  }
  if (!captured.empty())
    fail("grad", "the graph reaches " + std::to_string(captured.size()) +
                     " leaf(s) that require grad and are not listed");
  return grads;
}

// ---- recording ----------------------------------------------------------------------------------

bool needs_grad(const std::vector<Var>& inputs) {
  if (!grad_mode) return false;
  for (const Var& in : inputs)
    if (in.requires_grad()) return true;
  return false;
}

Var record(const char* op, Tensor value, const std::vector<Var>& inputs, BackwardFn backward) {
  if (!needs_grad(inputs)) return Var(std::move(value));
  auto node = std::make_shared<GradNode>();
  node->op = op;
  node->backward = std::move(backward);
  node->inputs.reserve(inputs.size());
  for (const Var& in : inputs) node->inputs.push_back({in.impl_->node, in.shape(), in.dtype()});
  Var out;
  out.impl_ = std::make_shared<Var::Impl>(Var::Impl{std::move(value), std::move(node)});
  return out;
}

// ---- grad mode ----------------------------------------------------------------------------------

bool grad_enabled() { return grad_mode; }

GradModeGuard::GradModeGuard(bool enabled) : previous_(grad_mode) { grad_mode = enabled; }

GradModeGuard::~GradModeGuard() { grad_mode = previous_; }

}  // namespace sprig
