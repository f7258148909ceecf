// Gradient checking: compares the gradients the autograd engine computes for a function of f64
// inputs against central finite differences (numeric_gradient, also used by the op tests).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "autograd/var.h"

namespace sprig {

// The gradient of a scalar function by central differences, (f(x + eps) - f(x - eps)) / 2eps per
// element: each element of x (f64, contiguous, on the CPU) is perturbed in place and restored, so
// f must read x when called. gradcheck and the op tests share it.
Tensor numeric_gradient(const std::function<double()>& f, const Tensor& x, double eps = 1e-6);

using GradcheckFn = std::function<Var(const std::vector<Var>&)>;

struct GradcheckResult {
  bool ok = true;
  // On failure: the worst mismatch (input index, element, analytic and numeric values) and the
  // number of mismatches; on success: the largest difference seen.
  std::string message;
};

// Checks d(sum(f(x) * r))/dx for every element of every input, r a fixed seeded random tensor of
// f's output shape (so every output element is checked, with distinct weights). Inputs must be
// f64 on the CPU; they are not modified. An element passes when
// |analytic - numeric| <= atol + rtol * |numeric|.
GradcheckResult gradcheck(const GradcheckFn& f, const std::vector<Tensor>& inputs,
                          double eps = 1e-6, double atol = 1e-5, double rtol = 1e-4);

}  // namespace sprig
