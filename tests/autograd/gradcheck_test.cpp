// gradcheck itself: it passes correct gradients, names the worst wrong one, and checks its inputs.
#include <gtest/gtest.h>

#include <stdexcept>

#include "tests/autograd/gradcheck_util.h"

namespace sprig {
namespace {

using testing::randn64;

// y = x^2 with a gradient that is off by `error`: dx = 2 x dy + error.
Var square_with_error(const Var& x, const Tensor& error) {
  const Tensor xv = x.value();
  return record("square", mul(xv, xv), {x}, [xv, error](const Tensor& dy) -> Grads {
    return {add(mul(mul(dy, xv), 2.0), error)};
  });
}

TEST(Gradcheck, AcceptsCorrectGradient) {
  const GradcheckResult r = gradcheck(
      [](const std::vector<Var>& in) {
        return square_with_error(in[0], Tensor::zeros({2, 3}, DType::f64));
      },
      {randn64({2, 3}, 1)});
  EXPECT_TRUE(r.ok) << r.message;
}

TEST(Gradcheck, ReportsTheWorstWrongElement) {
  const Tensor error = Tensor::from_vector<double>({0, 0.5, 0.1}, {3});
  const GradcheckResult r = gradcheck(
      [error](const std::vector<Var>& in) { return add(in[0], square_with_error(in[1], error)); },
      {randn64({3}, 2), randn64({3}, 3)});
  ASSERT_FALSE(r.ok);
  // Input 1 is wrong at elements 1 (by 0.5, the worst) and 2.
  EXPECT_NE(r.message.find("input 1 element [1]"), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("2 elements mismatch"), std::string::npos) << r.message;
}

TEST(Gradcheck, ChecksEveryOutputElement) {
  // A gradient that is wrong only for output element 2 is caught through the random projection.
  const GradcheckResult r = gradcheck(
      [](const std::vector<Var>& in) {
        const Tensor xv = in[0].value();
        return record("copy", xv.clone(), {in[0]}, [](const Tensor& dy) -> Grads {
          Tensor dx = dy.clone();
          dx.narrow(0, 2, 1).fill_(0.0);
          return {dx};
        });
      },
      {randn64({4}, 4)});
  ASSERT_FALSE(r.ok);
  EXPECT_NE(r.message.find("element [2]"), std::string::npos) << r.message;
}

TEST(Gradcheck, RequiresF64Inputs) {
  EXPECT_THROW(
      gradcheck([](const std::vector<Var>& in) { return in[0]; }, {Tensor::zeros({2}, DType::f32)}),
      std::invalid_argument);
}

TEST(Gradcheck, DoesNotModifyInputs) {
  const Tensor x = randn64({3}, 5);
  const Tensor before = x.clone();
  gradcheck([](const std::vector<Var>& in) { return in[0] * in[0]; }, {x});
  EXPECT_TRUE(testing::all_close(x, before, 0));
}

}  // namespace
}  // namespace sprig
