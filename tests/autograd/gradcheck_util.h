// GoogleTest helpers for gradient checks: an AssertionResult wrapper around sprig::gradcheck and
// random f64 inputs.
#pragma once

#include <gtest/gtest.h>

#include <vector>

#include "autograd/functions.h"
#include "autograd/gradcheck.h"
#include "tests/test_util.h"

namespace sprig::testing {

// EXPECT_TRUE(grad_ok(f, {x, y})) prints the worst mismatch on failure.
inline ::testing::AssertionResult grad_ok(const GradcheckFn& f, const std::vector<Tensor>& inputs,
                                          double eps = 1e-6, double atol = 1e-5,
                                          double rtol = 1e-4) {
  const GradcheckResult r = gradcheck(f, inputs, eps, atol, rtol);
  if (r.ok) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << r.message;
}

inline Tensor randn64(const Shape& shape, uint64_t seed) {
  return rand_normal(shape, seed, DType::f64);
}

// Values in [0.5, 2): safe inputs for log, sqrt, rsqrt, pow and divisors.
inline Tensor positive64(const Shape& shape, uint64_t seed) {
  return rand_uniform(shape, 0.5, 2.0, seed, DType::f64);
}

}  // namespace sprig::testing
