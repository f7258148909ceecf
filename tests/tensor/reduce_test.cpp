// CPU tests of reductions over one dimension, sum_all and softmax: hand-computed values over
// leading, middle and last dims, keepdim, the first-maximum rule, -inf rows, numerical stability,
// strided inputs, f64 and bf16 paths, every backward against central differences in f64, and the
// error messages for bad inputs.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "tensor/ops.h"
#include "tests/test_util.h"

namespace sprig {
namespace {

using testing::all_close;
using testing::invalid_argument_message;
using testing::non_contiguous;
using testing::numeric_grad;
using testing::rand_normal;

constexpr double kInf = std::numeric_limits<double>::infinity();

Tensor f64(const std::vector<double>& v, const Shape& shape) {
  return Tensor::from_vector(v, shape);
}

const Tensor& matrix() {  // [[1, 2, 3], [4, 5, 6]]
  static const Tensor m = f64({1, 2, 3, 4, 5, 6}, {2, 3});
  return m;
}

TEST(Reductions, HandComputedValuesOverEachDim) {
  const Tensor& x = matrix();
  EXPECT_EQ(sum(x, 1).to_vector<double>(), (std::vector<double>{6, 15}));
  EXPECT_EQ(sum(x, 0).to_vector<double>(), (std::vector<double>{5, 7, 9}));
  EXPECT_EQ(mean(x, -1).to_vector<double>(), (std::vector<double>{2, 5}));
  EXPECT_EQ(mean(x, 0).to_vector<double>(), (std::vector<double>{2.5, 3.5, 4.5}));
  EXPECT_EQ(max(x, 0).to_vector<double>(), (std::vector<double>{4, 5, 6}));
  EXPECT_EQ(max(x, 1).to_vector<double>(), (std::vector<double>{3, 6}));
  EXPECT_EQ(argmax(x, 0).to_vector<int64_t>(), (std::vector<int64_t>{1, 1, 1}));
  EXPECT_EQ(argmax(x, 1).to_vector<int64_t>(), (std::vector<int64_t>{2, 2}));
  EXPECT_TRUE(all_close(logsumexp(x, 1), f64({3.40760596444438, 6.407605964444381}, {2}), 1e-14));
  // log(e^1 + e^4) = 4 + log(1 + e^-3).
  EXPECT_TRUE(all_close(logsumexp(x, 0).select(0, 0),
                        Tensor::scalar(4 + std::log1p(std::exp(-3.0)), DType::f64), 1e-14));
}

TEST(Reductions, KeepdimAndShapes) {
  const Tensor x = Tensor::zeros({2, 3, 4});
  EXPECT_EQ(sum(x, 1).shape(), (Shape{2, 4}));
  EXPECT_EQ(sum(x, 1, true).shape(), (Shape{2, 1, 4}));
  EXPECT_EQ(max(x, -1, true).shape(), (Shape{2, 3, 1}));
  EXPECT_EQ(argmax(x, 0, true).shape(), (Shape{1, 3, 4}));
  EXPECT_EQ(argmax(x, 0).dtype(), DType::i64);
  EXPECT_EQ(logsumexp(x, 2).shape(), (Shape{2, 3}));
  const Tensor s = sum_all(matrix());
  EXPECT_EQ(s.dim(), 0);
  EXPECT_EQ(s.item(), 21);
  EXPECT_EQ(sum_all(Tensor::scalar(2.5)).item(), 2.5);
}

TEST(Reductions, MiddleDimensionOfA3dTensor) {
  // x[i, j, k] = 12 i + 4 j + k; summing j gives 36 i + 12 + 3 k.
  const Tensor x = Tensor::arange(24, DType::f64).view({2, 3, 4});
  std::vector<double> expected;
  for (int i = 0; i < 2; ++i)
    for (int k = 0; k < 4; ++k) expected.push_back(36 * i + 12 + 3 * k);
  EXPECT_EQ(sum(x, 1).to_vector<double>(), expected);
  EXPECT_EQ(max(x, 1).select(0, 1).to_vector<double>(), (std::vector<double>{20, 21, 22, 23}));
  EXPECT_EQ(argmax(neg(x), 1).to_vector<int64_t>(), std::vector<int64_t>(8, 0));
}

TEST(Reductions, WideInnerDimensionMatchesNaiveLoops) {
  // inner = 1100 spans several column blocks of the CPU kernel.
  const Tensor x = rand_normal({2, 3, 1100}, 7, DType::f64);
  const std::vector<double> v = x.to_vector<double>();
  std::vector<double> expected(2 * 1100, 0.0);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 1100; ++k) expected[i * 1100 + k] += v[(i * 3 + j) * 1100 + k];
  EXPECT_TRUE(all_close(sum(x, 1), Tensor::from_vector(expected, {2, 1100}), 1e-14));
  for (double& e : expected) e /= 3;
  EXPECT_TRUE(all_close(mean(x, 1), Tensor::from_vector(expected, {2, 1100}), 1e-14));
}

TEST(Reductions, MaxAndArgmaxPickTheFirstMaximum) {
  const Tensor x = f64({1, 3, 3, 0, 2, 2, 2, 2}, {2, 4});
  EXPECT_EQ(argmax(x, 1).to_vector<int64_t>(), (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(max(x, 1).to_vector<double>(), (std::vector<double>{3, 2}));
  const Tensor cols = f64({1, 5, 7, 5}, {2, 2});  // column 1 ties between rows
  EXPECT_EQ(argmax(cols, 0).to_vector<int64_t>(), (std::vector<int64_t>{1, 0}));
  const Tensor all_neg_inf = f64({-kInf, -kInf, -kInf}, {3});
  EXPECT_EQ(argmax(all_neg_inf, 0).item(), 0);
  EXPECT_EQ(max(all_neg_inf, 0).item(), -kInf);
}

TEST(Reductions, LogsumexpIsStableAndHandlesInfiniteRows) {
  const Tensor x = f64({1000, 1000, -kInf, -kInf, -kInf, 0}, {3, 2});
  const std::vector<double> y = logsumexp(x, 1).to_vector<double>();
  EXPECT_NEAR(y[0], 1000 + std::log(2.0), 1e-12);
  EXPECT_EQ(y[1], -kInf);  // all -inf: -inf, not NaN
  EXPECT_EQ(y[2], 0);
  const std::vector<float> y32 = logsumexp(x.to(DType::f32), 1).to_vector<float>();
  EXPECT_NEAR(y32[0], 1000 + std::log(2.0f), 1e-3);
  EXPECT_EQ(y32[1], -INFINITY);
}

TEST(Reductions, StridedInputsMatchContiguous) {
  const Tensor x = rand_normal({9, 6}, 1);
  const Tensor xt = non_contiguous(x);
  ASSERT_FALSE(xt.is_contiguous());
  for (int64_t dim : {0, 1}) {
    EXPECT_TRUE(all_close(sum(xt, dim), sum(x, dim), 0));
    EXPECT_TRUE(all_close(max(xt, dim), max(x, dim), 0));
    EXPECT_TRUE(all_close(logsumexp(xt, dim), logsumexp(x, dim), 0));
    EXPECT_EQ(argmax(xt, dim).to_vector<int64_t>(), argmax(x, dim).to_vector<int64_t>());
    EXPECT_TRUE(all_close(softmax(xt, dim), softmax(x, dim), 0));
  }
  // The transpose reduces along what is, in memory, the other dim.
  EXPECT_TRUE(all_close(sum(x.t(), 1), sum(x, 0), 1e-6));
}

TEST(Reductions, Bf16AccumulatesInF32AndKeepsDtype) {
  // 1000 bf16 ones sum exactly to 1000 in f32, while a bf16 accumulator stalls at 256.
  const Tensor ones = Tensor::ones({1000}, DType::bf16);
  const Tensor s = sum(ones, 0);
  EXPECT_EQ(s.dtype(), DType::bf16);
  EXPECT_EQ(s.item(), 1000);
  EXPECT_EQ(mean(ones, 0).item(), 1);
  const Tensor x = matrix().to(DType::bf16);
  EXPECT_EQ(max(x, 1).to_vector<float>(), (std::vector<float>{3, 6}));
  EXPECT_EQ(argmax(x, 0).to_vector<int64_t>(), (std::vector<int64_t>{1, 1, 1}));
  EXPECT_TRUE(all_close(logsumexp(x, 1), f64({3.40760596444438, 6.407605964444381}, {2}), 0, 4e-3));
}

TEST(SoftmaxOps, HandComputedValues) {
  const Tensor x = f64({1, 2, 3}, {3});
  EXPECT_TRUE(all_close(softmax(x),
                        f64({0.09003057317038046, 0.24472847105479767, 0.6652409557748219}, {3}),
                        1e-16, 1e-15));
  EXPECT_TRUE(all_close(log_softmax(x),
                        f64({-2.40760596444438, -1.4076059644443801, -0.40760596444438013}, {3}),
                        1e-15));
  EXPECT_TRUE(all_close(softmax(x.to(DType::f32)),
                        f64({0.09003057317038046, 0.24472847105479767, 0.6652409557748219}, {3}),
                        1e-7, 1e-6));
  // Over dim 0 of a [3, 2] tensor each column is its own distribution.
  const Tensor cols = f64({1, 0, 2, 0, 3, 0}, {3, 2});
  EXPECT_TRUE(all_close(
      softmax(cols, 0),
      f64({0.09003057317038046, 1.0 / 3, 0.24472847105479767, 1.0 / 3, 0.6652409557748219, 1.0 / 3},
          {3, 2}),
      1e-15));
}

TEST(SoftmaxOps, StableForLargeValuesAndZeroForAllNegInfRows) {
  const Tensor x = f64({1000, 1001, 1002, -kInf, -kInf, -kInf, -kInf, 0, -kInf}, {3, 3});
  const std::vector<double> p = softmax(x, 1).to_vector<double>();
  EXPECT_NEAR(p[0], 0.09003057317038046, 1e-15);
  EXPECT_NEAR(p[2], 0.6652409557748219, 1e-15);
  for (int k = 3; k < 6; ++k) EXPECT_EQ(p[k], 0);
  EXPECT_EQ(p[7], 1);
  EXPECT_EQ(p[6], 0);
  const std::vector<double> lp = log_softmax(x, 1).to_vector<double>();
  for (int k = 3; k < 6; ++k) EXPECT_EQ(lp[k], -kInf);
  EXPECT_EQ(lp[7], 0);
  EXPECT_EQ(lp[8], -kInf);
}

TEST(SoftmaxOps, Bf16KeepsDtype) {
  const Tensor y = softmax(Tensor::from_vector<double>({1, 2, 3}, {3}, DType::bf16));
  EXPECT_EQ(y.dtype(), DType::bf16);
  EXPECT_TRUE(all_close(y, f64({0.09003057317038046, 0.24472847105479767, 0.6652409557748219}, {3}),
                        0, 4e-3));
}

// ---- backward against central differences (f64) -------------------------------------------------

TEST(ReduceBackward, SumMeanMaxLogsumexp) {
  const Tensor x = rand_normal({3, 4, 5}, 10, DType::f64);
  for (int64_t dim : {0, 1, -1}) {
    for (bool keepdim : {false, true}) {
      SCOPED_TRACE("dim " + std::to_string(dim) + " keepdim " + std::to_string(keepdim));
      const Shape reduced = sum(x, dim, keepdim).shape();
      const Tensor dy = rand_normal(reduced, 11, DType::f64);
      EXPECT_TRUE(all_close(
          sum_backward(dy, x.shape(), dim, keepdim),
          numeric_grad([&](const Tensor& t) { return sum(t, dim, keepdim); }, x, dy), 1e-8));
      EXPECT_TRUE(all_close(
          mean_backward(dy, x.shape(), dim, keepdim),
          numeric_grad([&](const Tensor& t) { return mean(t, dim, keepdim); }, x, dy), 1e-8));
      EXPECT_TRUE(all_close(
          max_backward(dy, x, argmax(x, dim, keepdim), dim, keepdim),
          numeric_grad([&](const Tensor& t) { return max(t, dim, keepdim); }, x, dy), 1e-8));
      const Tensor y = logsumexp(x, dim, keepdim);
      EXPECT_TRUE(all_close(
          logsumexp_backward(dy, x, y, dim, keepdim),
          numeric_grad([&](const Tensor& t) { return logsumexp(t, dim, keepdim); }, x, dy), 1e-8));
    }
  }
}

TEST(ReduceBackward, MaxSendsGradientToTheFirstMaximumOnly) {
  const Tensor x = f64({1, 3, 3, 0}, {1, 4});
  const Tensor dx = max_backward(f64({5}, {1}), x, argmax(x, 1), 1, false);
  EXPECT_EQ(dx.to_vector<double>(), (std::vector<double>{0, 5, 0, 0}));
}

TEST(ReduceBackward, SoftmaxAndLogSoftmax) {
  const Tensor x = rand_normal({3, 4, 5}, 20, DType::f64);
  const Tensor dy = rand_normal({3, 4, 5}, 21, DType::f64);
  for (int64_t dim : {0, 1, 2}) {
    SCOPED_TRACE("dim " + std::to_string(dim));
    EXPECT_TRUE(all_close(softmax_backward(softmax(x, dim), dy, dim),
                          numeric_grad([&](const Tensor& t) { return softmax(t, dim); }, x, dy),
                          1e-8));
    EXPECT_TRUE(all_close(log_softmax_backward(log_softmax(x, dim), dy, dim),
                          numeric_grad([&](const Tensor& t) { return log_softmax(t, dim); }, x, dy),
                          1e-8));
  }
}

// ---- errors -------------------------------------------------------------------------------------

TEST(ReduceErrors, NameTheOpAndTheOffendingValues) {
  const Tensor& x = matrix();
  EXPECT_THROW(sum(x, 2), std::invalid_argument);
  EXPECT_EQ(invalid_argument_message([&] { sum(x, 2); }),
            "[sum] dim 2 is out of range for a tensor with 2 dimensions");
  EXPECT_EQ(invalid_argument_message([&] { softmax(x, -3); }),
            "[softmax] dim -3 is out of range for a tensor with 2 dimensions");
  EXPECT_EQ(invalid_argument_message([&] { argmax(Tensor::arange(4), 0); }),
            "[argmax] x must be a floating tensor, got i64");
  EXPECT_EQ(invalid_argument_message([&] {
              max(Tensor::zeros({2, 0}), 1);
            }),
            "[max] cannot reduce dim 1 of size 0 (shape [2, 0])");
  EXPECT_EQ(invalid_argument_message([&] { softmax_backward(x, x.to(DType::f32), 1); }),
            "[softmax_backward] dtype mismatch: f64 and f32");
  EXPECT_EQ(invalid_argument_message([&] { log_softmax_backward(x, x.t(), 1); }),
            "[log_softmax_backward] dy must have shape [2, 3], got [3, 2]");
  const Tensor v3 = f64({1, 2, 3}, {3}), v2 = f64({1, 2}, {2});
  EXPECT_EQ(invalid_argument_message([&] {
              sum_backward(v3, {2, 3}, 1, false);
            }),
            "[sum_backward] dy must have shape [2], got [3]");
  EXPECT_EQ(invalid_argument_message([&] {
              mean_backward(v2, {2, 3}, 1, true);
            }),
            "[mean_backward] dy must have shape [2, 1], got [2]");
}

}  // namespace
}  // namespace sprig
