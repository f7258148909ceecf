// Gradient checks (f64, central differences) of the elementwise functions: unary, binary with
// broadcasting, scalar variants and operators, where, masked_fill, cast.
#include <gtest/gtest.h>

#include "tests/autograd/gradcheck_util.h"

namespace sprig {
namespace {

using testing::all_close;
using testing::grad_ok;
using testing::positive64;
using testing::randn64;

using Inputs = const std::vector<Var>&;

TEST(ElementwiseGrad, Unary) {
  const UnaryOp ops[] = {UnaryOp::neg,     UnaryOp::exp,   UnaryOp::log,
                         UnaryOp::sqrt,    UnaryOp::rsqrt, UnaryOp::tanh,
                         UnaryOp::sigmoid, UnaryOp::silu,  UnaryOp::abs};
  for (UnaryOp op : ops) {
    SCOPED_TRACE(unary_op_name(op));
    const bool positive_domain = op == UnaryOp::log || op == UnaryOp::sqrt || op == UnaryOp::rsqrt;
    const Tensor x = positive_domain ? positive64({3, 4}, 1) : randn64({3, 4}, 1);
    EXPECT_TRUE(grad_ok([op](Inputs in) { return unary(op, in[0]); }, {x}));
  }
}

TEST(ElementwiseGrad, Pow) {
  for (double exponent : {2.0, 3.0, -1.5, 0.5}) {
    SCOPED_TRACE(exponent);
    EXPECT_TRUE(
        grad_ok([exponent](Inputs in) { return pow(in[0], exponent); }, {positive64({2, 5}, 2)}));
  }
}

TEST(ElementwiseGrad, BinaryWithBroadcasting) {
  const std::pair<Shape, Shape> shapes[] = {
      {{3, 4}, {3, 4}}, {{3, 4}, {4}}, {{4}, {3, 4}}, {{2, 1, 4}, {3, 1}}, {{}, {2, 3}}};
  for (BinaryOp op : {BinaryOp::add, BinaryOp::sub, BinaryOp::mul, BinaryOp::div}) {
    for (const auto& [a_shape, b_shape] : shapes) {
      SCOPED_TRACE(std::string(binary_op_name(op)) + " " + shape_str(a_shape) + " " +
                   shape_str(b_shape));
      EXPECT_TRUE(grad_ok([op](Inputs in) { return binary(op, in[0], in[1]); },
                          {randn64(a_shape, 3), positive64(b_shape, 4)}));
    }
  }
}

TEST(ElementwiseGrad, ScalarVariants) {
  for (BinaryOp op : {BinaryOp::add, BinaryOp::sub, BinaryOp::mul, BinaryOp::div}) {
    for (bool scalar_first : {false, true}) {
      SCOPED_TRACE(std::string(binary_op_name(op)) + (scalar_first ? " scalar first" : ""));
      EXPECT_TRUE(grad_ok(
          [op, scalar_first](Inputs in) { return binary_scalar(op, in[0], 1.7, scalar_first); },
          {positive64({2, 3}, 5)}));
    }
  }
}

TEST(ElementwiseGrad, Operators) {
  const Tensor a = Tensor::from_vector<double>({1, 2}, {2});
  const Tensor b = Tensor::from_vector<double>({4, 8}, {2});
  const Var av(a), bv(b);
  const Var v = (3.0 * av + bv) - (1.0 + av) * 2.0 + 8.0 / bv - (-bv) / 4.0;
  EXPECT_TRUE(all_close(v.value(), Tensor::from_vector<double>({6, 11}, {2}), 1e-12));
  EXPECT_TRUE(grad_ok(
      [](Inputs in) {
        return (in[0] * in[1] + 1.0) / (3.0 - in[0]) - (-in[1]) / 4.0 + 3.0 / in[1] - 2.0 * in[0] +
               (in[1] - 0.5);
      },
      {positive64({3}, 6), positive64({3}, 7)}));
}

TEST(ElementwiseGrad, Where) {
  const Tensor cond = Tensor::from_vector<bool>({true, false, false, true}, {4});
  EXPECT_TRUE(grad_ok([cond](Inputs in) { return where(cond, in[0], in[1]); },
                      {randn64({3, 4}, 8), randn64({4}, 9)}));
}

TEST(ElementwiseGrad, MaskedFill) {
  const Tensor mask = Tensor::from_vector<bool>({true, false, true}, {3, 1});  // broadcasts
  EXPECT_TRUE(
      grad_ok([mask](Inputs in) { return masked_fill(in[0], mask, -5.0); }, {randn64({3, 4}, 10)}));
}

TEST(ElementwiseGrad, CastSendsTheGradientBackInTheInputDtype) {
  Var x(Tensor::from_vector<float>({1.5f, -2.0f}, {2}), true);
  Var y = cast(x, DType::f64);
  EXPECT_EQ(y.dtype(), DType::f64);
  (y * y).backward(Tensor::from_vector<double>({1, 3}, {2}));
  EXPECT_EQ(x.grad().dtype(), DType::f32);
  EXPECT_TRUE(all_close(x.grad(), Tensor::from_vector<float>({3.0f, -12.0f}, {2}), 0));
  EXPECT_TRUE(
      grad_ok([](Inputs in) { return cast(in[0], DType::f64) * in[0]; }, {randn64({3}, 11)}));
}

}  // namespace
}  // namespace sprig
