// CPU tests of the elementwise ops: hand-computed values of every unary and binary op, NumPy
// broadcasting, strided and in-place kernels, the f64 and bf16 paths, where / masked_fill / sum_to,
// every backward against central differences in f64, and the error messages for bad inputs.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "tensor/cpu/kernels.h"
#include "tensor/ops.h"
#include "tests/test_util.h"

namespace sprig {
namespace {

using testing::all_close;
using testing::invalid_argument_message;
using testing::non_contiguous;
using testing::numeric_grad;
using testing::rand_normal;
using testing::rand_uniform;

Tensor f64(const std::vector<double>& v, const Shape& shape) {
  return Tensor::from_vector(v, shape);
}

struct UnaryCase {
  UnaryOp op;
  double exponent;
  std::vector<double> x, expected;
};

const std::vector<UnaryCase>& unary_cases() {
  static const std::vector<double> mixed{-1.5, -0.5, 0.5, 2.0};
  static const std::vector<double> positive{0.25, 1.0, 4.0};
  static const std::vector<UnaryCase> cases{
      {UnaryOp::neg, 0, mixed, {1.5, 0.5, -0.5, -2.0}},
      {UnaryOp::abs, 0, mixed, {1.5, 0.5, 0.5, 2.0}},
      {UnaryOp::exp,
       0,
       mixed,
       {0.22313016014842982, 0.6065306597126334, 1.6487212707001282, 7.38905609893065}},
      {UnaryOp::tanh,
       0,
       mixed,
       {-0.9051482536448664, -0.46211715726000974, 0.46211715726000974, 0.9640275800758169}},
      {UnaryOp::sigmoid,
       0,
       mixed,
       {0.18242552380635635, 0.3775406687981454, 0.6224593312018546, 0.8807970779778823}},
      {UnaryOp::silu,
       0,
       mixed,
       {-0.2736382857095345, -0.1887703343990727, 0.3112296656009273, 1.7615941559557646}},
      {UnaryOp::log, 0, positive, {-1.3862943611198906, 0.0, 1.3862943611198906}},
      {UnaryOp::sqrt, 0, positive, {0.5, 1.0, 2.0}},
      {UnaryOp::rsqrt, 0, positive, {2.0, 1.0, 0.5}},
      {UnaryOp::pow, 1.5, positive, {0.125, 1.0, 8.0}},
      {UnaryOp::pow, -1.0, positive, {4.0, 1.0, 0.25}},
      {UnaryOp::pow, 2.0, mixed, {2.25, 0.25, 0.25, 4.0}},
  };
  return cases;
}

TEST(UnaryOps, HandComputedValuesF32AndF64) {
  for (const UnaryCase& c : unary_cases()) {
    SCOPED_TRACE(unary_op_name(c.op));
    const Shape shape{static_cast<int64_t>(c.x.size())};
    const Tensor expected = f64(c.expected, shape);
    const Tensor y64 = unary(c.op, f64(c.x, shape), c.exponent);
    EXPECT_EQ(y64.dtype(), DType::f64);
    EXPECT_TRUE(all_close(y64, expected, 1e-15, 1e-14));
    const Tensor y32 = unary(c.op, f64(c.x, shape).to(DType::f32), c.exponent);
    EXPECT_EQ(y32.dtype(), DType::f32);
    EXPECT_TRUE(all_close(y32, expected, 1e-7, 1e-6));
  }
}

TEST(UnaryOps, Bf16ComputesInF32AndRoundsOnce) {
  const Tensor x = Tensor::from_vector<double>({-1.5, 0.5, 2.0, 3.0}, {4}, DType::bf16);
  const Tensor y = exp(x);
  EXPECT_EQ(y.dtype(), DType::bf16);
  // exp in f32 of the bf16 values, rounded to bf16 once.
  const Tensor expected = exp(x.to(DType::f32)).to(DType::bf16);
  EXPECT_EQ(y.to_vector<float>(), expected.to_vector<float>());
  EXPECT_TRUE(all_close(
      y, f64({0.22313016014842982, 1.6487212707001282, 7.38905609893065, 20.085536923187668}, {4}),
      0, 4e-3));
}

TEST(UnaryOps, StridedInputMatchesContiguous) {
  const Tensor x = rand_normal({6, 5}, 1);
  const Tensor xt = non_contiguous(x);
  ASSERT_FALSE(xt.is_contiguous());
  for (UnaryOp op : {UnaryOp::tanh, UnaryOp::silu, UnaryOp::abs, UnaryOp::neg}) {
    SCOPED_TRACE(unary_op_name(op));
    EXPECT_TRUE(all_close(unary(op, xt), unary(op, x), 0));
  }
}

TEST(UnaryOps, KernelRunsInPlaceOnStridedTensor) {
  const Tensor base = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  const Tensor xt = base.t();  // [3, 2], strided
  cpu::unary(UnaryOp::neg, xt, xt, 0.0);
  EXPECT_EQ(base.to_vector<float>(), (std::vector<float>{-1, -2, -3, -4, -5, -6}));
  cpu::binary_scalar(BinaryOp::sub, xt, 10.0, /*scalar_first=*/true, xt);
  EXPECT_EQ(base.to_vector<float>(), (std::vector<float>{11, 12, 13, 14, 15, 16}));
}

TEST(BinaryOps, HandComputedValues) {
  const Tensor a = f64({1, 2, 3, 4}, {4}), b = f64({2, 4, -1, 0.5}, {4});
  EXPECT_EQ(add(a, b).to_vector<double>(), (std::vector<double>{3, 6, 2, 4.5}));
  EXPECT_EQ(sub(a, b).to_vector<double>(), (std::vector<double>{-1, -2, 4, 3.5}));
  EXPECT_EQ(mul(a, b).to_vector<double>(), (std::vector<double>{2, 8, -3, 2}));
  EXPECT_EQ(div(a, b).to_vector<double>(), (std::vector<double>{0.5, 0.5, -3, 8}));
  const Tensor c = mul(a.to(DType::f32), b.to(DType::f32));
  EXPECT_EQ(c.dtype(), DType::f32);
  EXPECT_EQ(c.to_vector<float>(), (std::vector<float>{2, 8, -3, 2}));
}

TEST(BinaryOps, BroadcastsLikeNumPy) {
  // a[i, 0, k] = 10 i + k  [2, 1, 3];  b[j, k] = 100 j + k  [4, 3]  ->  out [2, 4, 3].
  std::vector<double> av, bv;
  for (int i = 0; i < 2; ++i)
    for (int k = 0; k < 3; ++k) av.push_back(10 * i + k);
  for (int j = 0; j < 4; ++j)
    for (int k = 0; k < 3; ++k) bv.push_back(100 * j + k);
  const Tensor out = add(f64(av, {2, 1, 3}), f64(bv, {4, 3}));
  ASSERT_EQ(out.shape(), (Shape{2, 4, 3}));
  const std::vector<double> v = out.to_vector<double>();
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 4; ++j)
      for (int k = 0; k < 3; ++k) EXPECT_EQ(v[(i * 4 + j) * 3 + k], 10 * i + 100 * j + 2 * k);
  EXPECT_EQ(broadcast_shapes({2, 1, 3}, {4, 3}, "add"), (Shape{2, 4, 3}));
  EXPECT_EQ(broadcast_shapes({}, {5, 1}, "add"), (Shape{5, 1}));
  EXPECT_EQ(mul(Tensor::scalar(2.0, DType::f64), f64({1, 2}, {2})).to_vector<double>(),
            (std::vector<double>{2, 4}));
}

TEST(BinaryOps, StridedAndBroadcastOperandsMatchContiguous) {
  const Tensor a = rand_normal({7, 5}, 2), b = rand_normal({7, 1}, 3);
  const Tensor expected = sub(a, b.expand({7, 5}).contiguous());
  EXPECT_TRUE(all_close(sub(non_contiguous(a), b), expected, 0));
  EXPECT_TRUE(all_close(sub(a, non_contiguous(b)), expected, 0));
  // A large strided case takes the parallel row walk.
  const Tensor big = rand_normal({300, 257}, 4), row = rand_normal({257}, 5);
  const Tensor big_expected = mul(big, row.expand({300, 257}).contiguous());
  EXPECT_TRUE(all_close(mul(non_contiguous(big), row), big_expected, 0));
}

TEST(BinaryOps, Bf16ResultKeepsDtype) {
  const Tensor a = Tensor::from_vector<double>({1.5, -2, 3}, {3}, DType::bf16);
  const Tensor b = Tensor::from_vector<double>({0.25, 4, 8}, {3}, DType::bf16);
  const Tensor out = div(a, b);
  EXPECT_EQ(out.dtype(), DType::bf16);
  EXPECT_EQ(out.to_vector<float>(), (std::vector<float>{6, -0.5, 0.375}));
}

TEST(BinaryScalarOps, BothOperandOrders) {
  const Tensor x = f64({1, 2, 4}, {3});
  EXPECT_EQ(add(x, 1.5).to_vector<double>(), (std::vector<double>{2.5, 3.5, 5.5}));
  EXPECT_EQ(sub(x, 1.0).to_vector<double>(), (std::vector<double>{0, 1, 3}));
  EXPECT_EQ(mul(x, -2.0).to_vector<double>(), (std::vector<double>{-2, -4, -8}));
  EXPECT_EQ(div(x, 4.0).to_vector<double>(), (std::vector<double>{0.25, 0.5, 1}));
  EXPECT_EQ(binary_scalar(BinaryOp::sub, x, 1.0, true).to_vector<double>(),
            (std::vector<double>{0, -1, -3}));
  EXPECT_EQ(binary_scalar(BinaryOp::div, x, 8.0, true).to_vector<double>(),
            (std::vector<double>{8, 4, 2}));
  const Tensor xb = binary_scalar(BinaryOp::div, x.to(DType::bf16), 1.0, true);
  EXPECT_EQ(xb.dtype(), DType::bf16);
  EXPECT_EQ(xb.to_vector<float>(), (std::vector<float>{1, 0.5, 0.25}));
  EXPECT_TRUE(all_close(mul(non_contiguous(rand_normal({4, 3}, 6)), 3.0),
                        mul(rand_normal({4, 3}, 6), 3.0), 0));
}

TEST(SumTo, SumsBroadcastDimensions) {
  const Tensor x = Tensor::arange(24, DType::f64).view({2, 3, 4});
  // sum over i and k of 12 i + 4 j + k = 60 + 32 j.
  const Tensor s = sum_to(x, {3, 1});
  ASSERT_EQ(s.shape(), (Shape{3, 1}));
  EXPECT_EQ(s.to_vector<double>(), (std::vector<double>{60, 92, 124}));
  EXPECT_EQ(sum_to(x, {1, 1, 4}).to_vector<double>(), (std::vector<double>{60, 66, 72, 78}));
  EXPECT_EQ(sum_to(x, {}).item(), 276);
  EXPECT_TRUE(sum_to(x, x.shape()).shares_storage(x));
  EXPECT_EQ(invalid_argument_message([&] {
              sum_to(x, {2, 4});
            }),
            "[sum_to] shapes [2, 3, 4] and [2, 4] do not broadcast");
  EXPECT_EQ(invalid_argument_message([&] {
              sum_to(x, {5, 2, 3, 4});
            }),
            "[sum_to] cannot sum [2, 3, 4] to [5, 2, 3, 4]");
}

TEST(WhereOps, SelectsWithBroadcastingForAnyDtype) {
  const Tensor cond = Tensor::from_vector<bool>({true, false}, {2, 1});
  const Tensor a = f64({1, 2, 3}, {3});
  const Tensor out = where(cond, a, Tensor::scalar(-1.0, DType::f64));
  ASSERT_EQ(out.shape(), (Shape{2, 3}));
  EXPECT_EQ(out.to_vector<double>(), (std::vector<double>{1, 2, 3, -1, -1, -1}));
  const Tensor ids = where(Tensor::from_vector<bool>({false, true, true}, {3}), Tensor::arange(3),
                           Tensor::full({3}, 7, DType::i64));
  EXPECT_EQ(ids.to_vector<int64_t>(), (std::vector<int64_t>{7, 1, 2}));
  const Tensor bf = where(Tensor::from_vector<bool>({true, false}, {2}),
                          Tensor::full({2}, 0.5, DType::bf16), Tensor::full({2}, 3, DType::bf16));
  EXPECT_EQ(bf.to_vector<float>(), (std::vector<float>{0.5, 3}));
}

TEST(WhereOps, MaskedFill) {
  const Tensor x = f64({1, 2, 3, 4, 5, 6}, {2, 3});
  const Tensor mask = Tensor::from_vector<bool>({false, true, false}, {3});
  EXPECT_EQ(masked_fill(x, mask, -INFINITY).to_vector<double>(),
            (std::vector<double>{1, -INFINITY, 3, 4, -INFINITY, 6}));
  const Tensor xt = non_contiguous(x.to(DType::f32));
  EXPECT_EQ(masked_fill(xt, mask, 0.0).to_vector<float>(), (std::vector<float>{1, 0, 3, 4, 0, 6}));
  const Tensor bad_mask = Tensor::zeros({2, 1, 3}, DType::boolean);
  EXPECT_EQ(invalid_argument_message([&] { masked_fill(x, bad_mask, 0); }),
            "[masked_fill] mask shape [2, 1, 3] does not broadcast to x shape [2, 3]");
}

// ---- backward against central differences (f64) -------------------------------------------------

TEST(ElementwiseBackward, UnaryMatchesCentralDifferences) {
  const Tensor mixed = rand_normal({3, 4}, 10, DType::f64);
  const Tensor positive = rand_uniform({3, 4}, 0.5, 2.0, 11, DType::f64);
  const Tensor dy = rand_normal({3, 4}, 12, DType::f64);
  const struct {
    UnaryOp op;
    double exponent;
    const Tensor& x;
  } cases[] = {
      {UnaryOp::neg, 0, mixed},     {UnaryOp::exp, 0, mixed},      {UnaryOp::log, 0, positive},
      {UnaryOp::sqrt, 0, positive}, {UnaryOp::rsqrt, 0, positive}, {UnaryOp::tanh, 0, mixed},
      {UnaryOp::sigmoid, 0, mixed}, {UnaryOp::silu, 0, mixed},     {UnaryOp::pow, 2.5, positive},
      {UnaryOp::pow, 3.0, mixed},   {UnaryOp::abs, 0, mixed}};
  for (const auto& c : cases) {
    SCOPED_TRACE(unary_op_name(c.op));
    const Tensor y = unary(c.op, c.x, c.exponent);
    const Tensor dx = unary_backward(c.op, c.x, y, dy, c.exponent);
    const Tensor expected =
        numeric_grad([&](const Tensor& x) { return unary(c.op, x, c.exponent); }, c.x, dy);
    EXPECT_TRUE(all_close(dx, expected, 1e-7, 1e-6));
  }
}

TEST(ElementwiseBackward, PowZeroExponentHasZeroGradientAtZero) {
  const Tensor x = f64({0, 2}, {2});
  const Tensor dx = unary_backward(UnaryOp::pow, x, pow(x, 0.0), f64({1, 1}, {2}), 0.0);
  EXPECT_EQ(dx.to_vector<double>(), (std::vector<double>{0, 0}));
}

TEST(ElementwiseBackward, BinaryWithBroadcastMatchesCentralDifferences) {
  const Tensor a = rand_normal({2, 1, 3}, 20, DType::f64);
  const Tensor b = rand_uniform({4, 3}, 0.5, 2.0, 21, DType::f64);
  const Tensor dy = rand_normal({2, 4, 3}, 22, DType::f64);
  for (BinaryOp op : {BinaryOp::add, BinaryOp::sub, BinaryOp::mul, BinaryOp::div}) {
    SCOPED_TRACE(binary_op_name(op));
    const auto [da, db] = binary_backward(op, a, b, dy);
    ASSERT_EQ(da.shape(), a.shape());
    ASSERT_EQ(db.shape(), b.shape());
    EXPECT_TRUE(all_close(
        da, numeric_grad([&](const Tensor& x) { return binary(op, x, b); }, a, dy), 1e-7, 1e-6));
    EXPECT_TRUE(all_close(
        db, numeric_grad([&](const Tensor& x) { return binary(op, a, x); }, b, dy), 1e-7, 1e-6));
  }
}

TEST(ElementwiseBackward, WhereRoutesAndSumsGradients) {
  const Tensor cond = Tensor::from_vector<bool>({true, false, true}, {3});
  const Tensor dy = f64({1, 2, 3, 4, 5, 6}, {2, 3});
  // a is [2, 3]: gets dy where cond; b is [1] (broadcast): gets the sum of dy where !cond.
  const auto [da, db] = where_backward(cond, {2, 3}, {1}, dy);
  EXPECT_EQ(da.to_vector<double>(), (std::vector<double>{1, 0, 3, 4, 0, 6}));
  ASSERT_EQ(db.shape(), (Shape{1}));
  EXPECT_EQ(db.item(), 2 + 5);
}

// ---- errors -------------------------------------------------------------------------------------

TEST(ElementwiseErrors, NameTheOpAndTheOffendingValues) {
  const Tensor a = Tensor::zeros({2, 3}), b = Tensor::zeros({4});
  EXPECT_THROW(add(a, b), std::invalid_argument);
  EXPECT_EQ(invalid_argument_message([&] { add(a, b); }),
            "[add] shapes [2, 3] and [4] do not broadcast");
  EXPECT_EQ(invalid_argument_message([&] {
              mul(a, Tensor::zeros({2, 3}, DType::f64));
            }),
            "[mul] dtype mismatch: f32 and f64");
  EXPECT_EQ(invalid_argument_message([&] { exp(Tensor::arange(3)); }),
            "[exp] x must be a floating tensor, got i64");
  EXPECT_EQ(invalid_argument_message([&] { sub(Tensor(), a); }), "[sub] a is undefined");
  EXPECT_EQ(invalid_argument_message([&] { binary_backward(BinaryOp::div, a, a, b); }),
            "[div_backward] dy must have shape [2, 3], got [4]");
  EXPECT_EQ(invalid_argument_message([&] { unary_backward(UnaryOp::tanh, a, a, b); }),
            "[tanh_backward] dy must have shape [2, 3], got [4]");
  EXPECT_EQ(invalid_argument_message([&] { where(a, a, a); }),
            "[where] cond must be bool, got f32");
  EXPECT_EQ(invalid_argument_message([&] { masked_fill(a, a, 0.0); }),
            "[masked_fill] mask must be bool, got f32");
  EXPECT_EQ(invalid_argument_message([&] { where(Tensor::zeros({2}, DType::boolean), a, a); }),
            "[where] shapes [2] and [2, 3] do not broadcast");
}

}  // namespace
}  // namespace sprig
