// Helpers shared by all test binaries: tensor comparisons with tolerances, random test tensors,
// and the guard that skips GPU parity tests on machines without a CUDA device.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "tensor/cuda/kernels.h"
#include "tensor/random.h"
#include "tensor/tensor.h"

namespace sprig::testing {

inline bool has_cuda() { return cuda::device_count() > 0; }

// Skips the current test (with the reason printed) when no CUDA device is present.
#define SPRIG_REQUIRE_CUDA() \
  if (!::sprig::testing::has_cuda()) GTEST_SKIP() << "no CUDA device: GPU parity test skipped"

// Largest |a - b| over all elements (compared in f64 on the host; shapes must match).
inline double max_abs_diff(const Tensor& a, const Tensor& b) {
  EXPECT_EQ(a.shape(), b.shape());
  const std::vector<double> x = a.to_vector<double>(), y = b.to_vector<double>();
  double m = 0;
  for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
    if (std::isnan(x[i]) != std::isnan(y[i])) return INFINITY;
    if (std::isinf(x[i]) || std::isinf(y[i])) {
      if (x[i] != y[i]) return INFINITY;
      continue;
    }
    m = std::max(m, std::abs(x[i] - y[i]));
  }
  return m;
}

// Elementwise |a - b| <= atol + rtol * |b|, reporting the first few offenders.
inline ::testing::AssertionResult all_close(const Tensor& a, const Tensor& b, double atol,
                                            double rtol = 0.0) {
  if (a.shape() != b.shape())
    return ::testing::AssertionFailure()
           << "shapes differ: " << shape_str(a.shape()) << " vs " << shape_str(b.shape());
  const std::vector<double> x = a.to_vector<double>(), y = b.to_vector<double>();
  int bad = 0;
  std::string msg;
  for (size_t i = 0; i < x.size(); ++i) {
    const bool same_special = (std::isnan(x[i]) && std::isnan(y[i])) ||
                              (std::isinf(x[i]) && x[i] == y[i]);
    if (same_special || std::abs(x[i] - y[i]) <= atol + rtol * std::abs(y[i])) continue;
    if (bad++ < 5)
      msg += " [" + std::to_string(i) + "] " + std::to_string(x[i]) + " vs " +
             std::to_string(y[i]) + ";";
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << bad << " of " << x.size()
                                       << " elements differ beyond atol=" << atol
                                       << " rtol=" << rtol << ":" << msg;
}

// Deterministic random tensors for tests.
inline Tensor rand_normal(const Shape& shape, uint64_t seed, DType dtype = DType::f32,
                          Device device = Device::cpu()) {
  Generator gen(seed);
  return normal(shape, 0.0, 1.0, dtype, device, gen);
}
inline Tensor rand_uniform(const Shape& shape, double lo, double hi, uint64_t seed,
                           DType dtype = DType::f32, Device device = Device::cpu()) {
  Generator gen(seed);
  return uniform(shape, lo, hi, dtype, device, gen);
}

// A non-contiguous tensor with the same values as `x` (x is written into the transpose of a
// larger buffer, then viewed back), to exercise strided inputs.
inline Tensor non_contiguous(const Tensor& x) {
  if (x.dim() < 2) {
    Tensor big = Tensor::zeros({x.numel() * 2}, x.dtype(), x.device());
    Tensor v = big.slice(0, 0, x.numel() * 2, 2).view(x.shape());
    v.copy_(x);
    return v;
  }
  Shape swapped = x.shape();
  std::swap(swapped[0], swapped[1]);
  Tensor buf = Tensor::zeros(swapped, x.dtype(), x.device());
  Tensor v = buf.transpose(0, 1);
  v.copy_(x);
  return v;
}

// The message of the std::invalid_argument that f() throws, or "" when it throws nothing; error
// texts are then checked with EXPECT_EQ.
template <class F> std::string invalid_argument_message(F&& f) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

// Central-difference gradient of L(x) = sum(f(x) * w) with respect to x (f64), the reference that
// backward functions given dy = w are checked against. Sums are taken on the host in f64.
template <class F> Tensor numeric_grad(F&& f, const Tensor& x, const Tensor& w, double h = 1e-6) {
  const std::vector<double> weights = w.to_vector<double>();
  const auto loss = [&](const Tensor& at) {
    const std::vector<double> y = f(at).template to_vector<double>();
    double s = 0;
    for (size_t i = 0; i < y.size(); ++i) s += y[i] * weights[i];
    return s;
  };
  Tensor probe = x.to(DType::f64).clone();
  Tensor grad = Tensor::empty(x.shape(), DType::f64);
  double* p = probe.data<double>();
  for (int64_t i = 0; i < probe.numel(); ++i) {
    const double saved = p[i];
    p[i] = saved + h;
    const double up = loss(probe);
    p[i] = saved - h;
    const double down = loss(probe);
    p[i] = saved;
    grad.data<double>()[i] = (up - down) / (2 * h);
  }
  return grad;
}

}  // namespace sprig::testing
