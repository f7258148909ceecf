// CPU tests of swiglu: hand-computed values, backward against central differences in f64,
// non-contiguous inputs and argument errors.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "autograd/gradcheck.h"
#include "tensor/ops.h"
#include "tests/tensor/op_test_util.h"
#include "tests/test_util.h"

namespace sprig {
namespace {

using testing::all_close;
using testing::dot;
using testing::non_contiguous;
using testing::rand_normal;
using testing::throws_invalid;

TEST(Swiglu, HandComputedValues) {
  // silu(0) = 0, silu(1) = 0.7310586, silu(-2) = -2 * 0.1192029 = -0.2384058.
  const Tensor gate = Tensor::from_vector<float>({0, 1, -2}, {3});
  const Tensor up = Tensor::from_vector<float>({3, 2, 1}, {3});
  EXPECT_TRUE(all_close(swiglu(gate, up),
                        Tensor::from_vector<float>({0, 1.4621172f, -0.2384058f}, {3}), 1e-6));
}

TEST(Swiglu, BackwardMatchesFiniteDifferences) {
  const Tensor gate = rand_normal({4, 5}, 30, DType::f64), up = rand_normal({4, 5}, 31, DType::f64);
  const Tensor dout = rand_normal({4, 5}, 32, DType::f64);
  const auto loss = [&] { return dot(swiglu(gate, up), dout); };
  const auto [dgate, dup] = swiglu_backward(gate, up, dout);
  EXPECT_TRUE(all_close(dgate, numeric_gradient(loss, gate), 1e-8));
  EXPECT_TRUE(all_close(dup, numeric_gradient(loss, up), 1e-8));
}

TEST(Swiglu, NonContiguousInputs) {
  const Tensor gate = rand_normal({6, 4}, 33), up = rand_normal({6, 4}, 34);
  EXPECT_TRUE(all_close(swiglu(non_contiguous(gate), non_contiguous(up)), swiglu(gate, up), 0.0));
}

TEST(Swiglu, RejectsBadInputs) {
  EXPECT_TRUE(throws_invalid(
      [&] {
        swiglu(Tensor::zeros({2, 3}), Tensor::zeros({3, 2}));
      },
      "[swiglu] up must have shape [2, 3], got [3, 2]"));
  EXPECT_TRUE(throws_invalid([&] { swiglu(Tensor::zeros({2}), Tensor::zeros({2}, DType::bf16)); },
                             "[swiglu] dtype mismatch: f32 and bf16"));
  EXPECT_TRUE(throws_invalid(
      [&] { swiglu_backward(Tensor::zeros({2}), Tensor::zeros({2}), Tensor::zeros({3})); },
      "[swiglu_backward] dout must have shape [2], got [3]"));
}

}  // namespace
}  // namespace sprig
