// Gradient checks (f64, central differences) of reductions over each dim (with and without
// keepdim), whole-tensor sum/mean, softmax and log_softmax.
#include <gtest/gtest.h>

#include "tests/autograd/gradcheck_util.h"

namespace sprig {
namespace {

using testing::all_close;
using testing::grad_ok;
using testing::randn64;

using Inputs = const std::vector<Var>&;
using Reduction = Var (*)(const Var&, int64_t, bool);

TEST(ReduceGrad, OverEachDimWithAndWithoutKeepdim) {
  const std::pair<const char*, Reduction> reductions[] = {
      {"sum", sum}, {"mean", mean}, {"max", max}, {"logsumexp", logsumexp}};
  const Tensor x = randn64({2, 3, 4}, 1);  // distinct values: max has a unique argmax
  for (const auto& [name, each] : reductions) {
    const Reduction reduce = each;  // a lambda cannot capture a structured binding in clang 14
    for (int64_t dim : {0, 1, 2, -1}) {
      for (bool keepdim : {false, true}) {
        SCOPED_TRACE(std::string(name) + " dim " + std::to_string(dim) +
                     (keepdim ? " keepdim" : ""));
        EXPECT_TRUE(grad_ok(
            [reduce, dim, keepdim](Inputs in) { return reduce(in[0], dim, keepdim); }, {x}));
      }
    }
  }
}

TEST(ReduceGrad, MaxSendsTheGradientToTheFirstMaximum) {
  Var x(Tensor::from_vector<double>({1, 5, 5, 2}, {2, 2}), true);
  Var m = max(x, 1);
  EXPECT_TRUE(all_close(m.value(), Tensor::from_vector<double>({5, 5}, {2}), 0));
  m.backward(Tensor::from_vector<double>({10, 20}, {2}));
  EXPECT_TRUE(all_close(x.grad(), Tensor::from_vector<double>({0, 10, 20, 0}, {2, 2}), 0));
}

TEST(ReduceGrad, SumAllAndMeanAll) {
  const Tensor x = randn64({3, 4}, 2);
  EXPECT_TRUE(grad_ok([](Inputs in) { return sum_all(in[0]); }, {x}));
  EXPECT_TRUE(grad_ok([](Inputs in) { return mean_all(in[0]); }, {x}));
  Var v(Tensor::from_vector<double>({1, 2, 3, 6}, {2, 2}), true);
  Var m = mean_all(v);
  EXPECT_EQ(m.dim(), 0);
  EXPECT_DOUBLE_EQ(m.value().item(), 3.0);
  m.backward();
  EXPECT_TRUE(all_close(v.grad(), Tensor::full({2, 2}, 0.25, DType::f64), 0));
}

TEST(ReduceGrad, SoftmaxAndLogSoftmax) {
  const Tensor x = randn64({3, 5}, 3);
  for (int64_t dim : {-1, 0}) {
    SCOPED_TRACE(dim);
    EXPECT_TRUE(grad_ok([dim](Inputs in) { return softmax(in[0], dim); }, {x}));
    EXPECT_TRUE(grad_ok([dim](Inputs in) { return log_softmax(in[0], dim); }, {x}));
  }
}

}  // namespace
}  // namespace sprig
