// Helpers shared by all test binaries: the source tree fixtures are read from, tensor comparisons
// with tolerances, the one parity rule of every GPU test (a CUDA result against its CPU twin),
// random test tensors, central-difference gradients, and the guard that skips GPU tests on machines
// without a CUDA device.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

#include "autograd/gradcheck.h"
#include "tensor/cuda/kernels.h"
#include "tensor/random.h"
#include "tensor/tensor.h"

namespace sprig::testing {

// The source tree the tests read fixtures (tests/golden, train/configs) from: $SPRIG_SOURCE_DIR
// when set (the unpacked tree of a GPU bundle: tools/gpu_check.sh sets it), else the tree this
// binary was built from.
inline std::string source_dir() {
  const char* dir = std::getenv("SPRIG_SOURCE_DIR");
  return dir && *dir ? dir : SPRIG_SOURCE_DIR;
}

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
    const bool same_special =
        (std::isnan(x[i]) && std::isnan(y[i])) || (std::isinf(x[i]) && x[i] == y[i]);
    if (same_special || std::abs(x[i] - y[i]) <= atol + rtol * std::abs(y[i])) continue;
    if (bad++ < 5)
      msg += " [" + std::to_string(i) + "] " + std::to_string(x[i]) + " vs " +
             std::to_string(y[i]) + ";";
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << bad << " of " << x.size() << " elements differ beyond atol=" << atol << " rtol=" << rtol
         << ":" << msg;
}

// ---- GPU parity ---------------------------------------------------------------------------------
// How close a CUDA result must come to its CPU twin on the same inputs:
// |gpu - cpu| <= atol + rtol * |cpu| elementwise.
struct Tolerance {
  double atol = 0, rtol = 0;
};

// For results of `dtype` whose elements each combine `terms` values of size about `scale` (terms
// 1 for elementwise ops; the reduced length for sums, dot products and GEMMs):
//   rtol covers the result's own rounding (one step of bf16 or f16), or in f32 and f64 the
//     devices' different math (transcendental functions a few ulps apart): 1e-2 bf16, 2e-3 f16,
//     1e-5 f32, 1e-12 f64;
//   atol is rtol times `scale` (results that cancel to about 0), plus the rounding of the terms
//     accumulated in another order, about two ulps of the accumulation type per term: 1e-7 (f32
//     accumulation) or 1e-14 (f64) times `scale`.
inline Tolerance parity_tolerance(DType dtype, int64_t terms = 1, double scale = 1.0) {
  double rtol = 1e-5;
  if (dtype == DType::bf16) rtol = 1e-2;
  if (dtype == DType::f16) rtol = 2e-3;
  if (dtype == DType::f64) rtol = 1e-12;
  const double per_term = dtype == DType::f64 ? 1e-14 : 1e-7;
  return {scale * (rtol + per_term * static_cast<double>(std::max<int64_t>(terms, 1))), rtol};
}

// The CUDA result `gpu` against its CPU twin `cpu` under parity_tolerance(cpu's dtype, ...).
inline ::testing::AssertionResult parity(const Tensor& gpu, const Tensor& cpu, int64_t terms = 1,
                                         double scale = 1.0) {
  if (!gpu.device().is_cuda())
    return ::testing::AssertionFailure()
           << "the first tensor must be the CUDA result, got " << gpu.describe();
  const Tolerance tol = parity_tolerance(cpu.dtype(), terms, scale);
  return all_close(gpu, cpu, tol.atol, tol.rtol);
}

// EXPECT_PARITY(gpu, cpu[, terms[, scale]]): the assertion every GPU test states.
#define EXPECT_PARITY(gpu, cpu, ...) \
  EXPECT_TRUE(::sprig::testing::parity((gpu), (cpu)__VA_OPT__(, ) __VA_ARGS__))

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

// The same for std::runtime_error.
template <class F> std::string runtime_error_message(F&& f) {
  try {
    f();
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

// sum(a * b) over all elements, in f64.
inline double dot(const Tensor& a, const Tensor& b) {
  const std::vector<double> x = a.to_vector<double>(), y = b.to_vector<double>();
  double s = 0;
  for (size_t i = 0; i < x.size(); ++i) s += x[i] * y[i];
  return s;
}

// The gradient of L(x) = sum(f(x) * w) with respect to x, in f64 by central differences
// (numeric_gradient, the routine gradcheck uses): the reference that backward functions given
// dy = w are checked against.
template <class F> Tensor numeric_grad(F&& f, const Tensor& x, const Tensor& w, double h = 1e-6) {
  const Tensor probe = x.to(DType::f64).clone();
  return numeric_gradient([&] { return dot(f(probe), w); }, probe, h);
}

}  // namespace sprig::testing
