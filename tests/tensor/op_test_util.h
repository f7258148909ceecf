// Helpers for the op tests of this folder: central finite differences (the gradient of a scalar
// function of an f64 CPU tensor), the projection used to make that scalar, the check that a call
// throws std::invalid_argument with a given message, and the copy to the GPU of parity tests.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "tensor/tensor.h"

namespace sprig::testing {

// sum(a * b) over all elements, in f64.
inline double dot(const Tensor& a, const Tensor& b) {
  const std::vector<double> x = a.to_vector<double>(), y = b.to_vector<double>();
  double s = 0;
  for (size_t i = 0; i < x.size(); ++i) s += x[i] * y[i];
  return s;
}

// d f / d x by central differences; x (contiguous f64 on the CPU) is perturbed in place and
// restored, so f must read x when called.
inline Tensor numeric_grad(const std::function<double()>& f, const Tensor& x, double h = 1e-6) {
  Tensor grad = Tensor::zeros(x.shape(), DType::f64);
  double* xp = x.data<double>();
  double* gp = grad.data<double>();
  for (int64_t i = 0; i < x.numel(); ++i) {
    const double saved = xp[i];
    xp[i] = saved + h;
    const double up = f();
    xp[i] = saved - h;
    const double down = f();
    xp[i] = saved;
    gp[i] = (up - down) / (2 * h);
  }
  return grad;
}

inline Tensor to_cuda(const Tensor& t) { return t.to(Device::cuda()); }

// Success when f throws std::invalid_argument whose message contains `text`.
inline ::testing::AssertionResult throws_invalid(const std::function<void()>& f,
                                                 const std::string& text) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    if (std::string(e.what()).find(text) != std::string::npos)
      return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << "message \"" << e.what() << "\" lacks \"" << text
                                         << "\"";
  }
  return ::testing::AssertionFailure() << "no std::invalid_argument thrown (wanted \"" << text
                                       << "\")";
}

}  // namespace sprig::testing
