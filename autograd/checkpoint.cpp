// Activation checkpointing: record once, rerun in backward.
#include "autograd/checkpoint.h"

#include <stdexcept>
#include <string>

namespace sprig {

Var checkpoint(const Segment& segment, const std::vector<Var>& inputs,
               const std::vector<Var>& parameters) {
  for (size_t i = 0; i < parameters.size(); ++i)
    if (!parameters[i].is_leaf())
      throw std::invalid_argument("[checkpoint] parameter " + std::to_string(i) +
                                  " is not a leaf: pass what a segment computes as an input");
  std::vector<Var> edges = inputs;  // the node's inputs: the segment's, then its parameters
  edges.insert(edges.end(), parameters.begin(), parameters.end());
  if (!needs_grad(edges)) return segment(inputs);

  std::vector<Var> detached;
  for (const Var& in : inputs) detached.push_back(in.detach());
  Tensor value;
  {
    NoGradGuard no_grad;
    value = segment(detached).value();
  }
  std::vector<Tensor> saved;  // the inputs' values, shared with their producers
  std::vector<bool> trained;
  for (const Var& in : inputs) {
    saved.push_back(in.value());
    trained.push_back(in.requires_grad());
  }
  return record("checkpoint", std::move(value), edges,
                [segment, saved, trained, parameters](const Tensor& grad_out) {
                  std::vector<Var> leaves;
                  for (size_t i = 0; i < saved.size(); ++i)
                    leaves.emplace_back(saved[i], trained[i]);
                  Var out;
                  {
                    GradModeGuard recording(true);
                    out = segment(leaves);
                  }
                  leaves.insert(leaves.end(), parameters.begin(), parameters.end());
                  return grad(out, grad_out, leaves);
                });
}

}  // namespace sprig
