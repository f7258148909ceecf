// The backward engine: fan-out sums, diamonds, accumulation across backward calls, no-grad mode,
// detach, graph freeing, deep graphs, seeds and leaf rules.
#include <gtest/gtest.h>

#include <stdexcept>
#include <thread>

#include "autograd/functions.h"
#include "tests/test_util.h"

namespace sprig {
namespace {

using testing::all_close;

Tensor vec(const std::vector<double>& v, DType dtype = DType::f64) {
  return Tensor::from_vector(v, {static_cast<int64_t>(v.size())}, dtype);
}

TEST(Engine, FanOutSumsGradients) {
  Var x(vec({1, 2, 3}), true);
  Var y = x * x + x;
  y.backward(Tensor::ones({3}, DType::f64));
  EXPECT_TRUE(all_close(x.grad(), vec({3, 5, 7}), 0));  // 2x + 1
}

TEST(Engine, DiamondGraph) {
  // a = 3x; d = (a * a) * (a + 1) = a^3 + a^2; dd/dx = 3 (3a^2 + 2a).
  Var x(vec({1, 2}), true);
  Var a = x * 3.0;
  Var d = (a * a) * (a + 1.0);
  sum_all(d).backward();
  EXPECT_TRUE(all_close(x.grad(), vec({99, 360}), 1e-12));
}

TEST(Engine, AccumulatesAcrossBackwardCallsUntilZeroGrad) {
  Var x(vec({1, -2}), true);
  for (int micro_batch = 0; micro_batch < 2; ++micro_batch) sum_all(x * x).backward();
  EXPECT_TRUE(all_close(x.grad(), vec({4, -8}), 0));  // 2 * 2x
  x.zero_grad();
  EXPECT_FALSE(x.grad().defined());
  sum_all(x * 5.0).backward();
  EXPECT_TRUE(all_close(x.grad(), vec({5, 5}), 0));
}

TEST(Engine, NoGradGuardBuildsNoGraphAndNests) {
  Var x(vec({1, 2}), true);
  {
    NoGradGuard outer;
    {
      NoGradGuard inner;
      EXPECT_FALSE(grad_enabled());
    }
    EXPECT_FALSE(grad_enabled());
    Var y = x * x;
    EXPECT_FALSE(y.requires_grad());
    EXPECT_TRUE(all_close(y.value(), vec({1, 4}), 0));
    EXPECT_THROW(sum_all(y).backward(), std::invalid_argument);
  }
  EXPECT_TRUE(grad_enabled());
  EXPECT_TRUE((x * x).requires_grad());
}

TEST(Engine, GradModeIsPerThread) {
  NoGradGuard no_grad;
  bool other_thread_enabled = false;
  std::thread([&] { other_thread_enabled = grad_enabled(); }).join();
  EXPECT_TRUE(other_thread_enabled);
  EXPECT_FALSE(grad_enabled());
}

TEST(Engine, DetachStopsGradients) {
  Var x(vec({2, 3}), true);
  Var d = x.detach();
  EXPECT_FALSE(d.requires_grad());
  EXPECT_TRUE(d.value().shares_storage(x.value()));
  sum_all(x * d).backward();
  EXPECT_TRUE(all_close(x.grad(), vec({2, 3}), 0));  // d/dx (x * const) = const, not 2x
}

TEST(Engine, SecondBackwardThroughFreedGraphThrows) {
  Var x(vec({1, 2}), true);
  Var y = x * x;
  Var a = sum_all(y), b = sum_all(y * 2.0);
  a.backward();
  EXPECT_THROW(a.backward(), std::runtime_error);
  try {
    b.backward();  // shares y's node, which a's backward freed
    FAIL() << "expected a freed-graph error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("freed"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(all_close(x.grad(), vec({2, 4}), 0));  // only a's backward ran
}

TEST(Engine, BackwardReleasesSavedTensors) {
  Var x(vec({1, 2}), true);
  const Tensor c = vec({3, 4});
  const long uses = c.storage().use_count();
  Var y = x * Var(c);  // mul saves both operands for backward
  EXPECT_GT(c.storage().use_count(), uses);
  sum_all(y).backward();
  EXPECT_EQ(c.storage().use_count(), uses);
}

TEST(Engine, ConstantsGetNoGradient) {
  Var x(vec({1, 2}), true);
  Var c(vec({3, 4}));
  sum_all(x * c).backward();
  EXPECT_FALSE(c.grad().defined());
  EXPECT_FALSE(c.requires_grad());
  EXPECT_TRUE(all_close(x.grad(), vec({3, 4}), 0));
}

TEST(Engine, CopiesShareValueAndGradient) {
  Var x(vec({1, 2}), true);
  Var alias = x;
  sum_all(alias * 2.0).backward();
  EXPECT_TRUE(all_close(x.grad(), vec({2, 2}), 0));
  alias.zero_grad();
  EXPECT_FALSE(x.grad().defined());
}

TEST(Engine, DeepChainDoesNotOverflowTheStack) {
  Var x(Tensor::scalar(1.0, DType::f64), true);
  Var y = x;
  for (int i = 0; i < 10000; ++i) y = y * 1.0001;
  y.backward();
  EXPECT_NEAR(x.grad().item(), std::pow(1.0001, 10000), 1e-9);
}

TEST(Engine, DroppingADeepGraphWithoutBackwardDoesNotOverflowTheStack) {
  Var x(Tensor::scalar(1.0, DType::f64), true);
  {
    Var y = x;
    for (int i = 0; i < 200000; ++i) y = y + 1.0;
    EXPECT_DOUBLE_EQ(y.value().item(), 200001.0);
  }
  EXPECT_FALSE(x.grad().defined());
}

TEST(Engine, SeedRules) {
  Var x(vec({1, 2, 3}), true);
  Var y = x * 2.0;
  EXPECT_THROW(y.backward(), std::invalid_argument);  // non-scalar needs a seed
  EXPECT_THROW(y.backward(Tensor::ones({2}, DType::f64)), std::invalid_argument);
  y.backward(vec({1, 10, 100}, DType::f32));  // the seed is converted to y's dtype
  EXPECT_TRUE(all_close(x.grad(), vec({2, 20, 200}), 0));
}

TEST(Engine, BackwardOnALeafAccumulatesTheSeed) {
  Var x(vec({1, 2}), true);
  x.backward(vec({5, 6}));
  x.backward(vec({1, 1}));
  EXPECT_TRUE(all_close(x.grad(), vec({6, 7}), 0));
}

TEST(Engine, LeafRules) {
  EXPECT_THROW(Var(Tensor::zeros({2}, DType::i64), true), std::invalid_argument);
  EXPECT_THROW(Var{Tensor()}, std::invalid_argument);
  Var x(vec({1, 2}), true);
  Var y = x * 2.0;
  EXPECT_FALSE(y.is_leaf());
  EXPECT_THROW(y.set_requires_grad(false), std::invalid_argument);
  EXPECT_FALSE(y.grad().defined());  // intermediate results keep no gradient
  x.set_requires_grad(false);
  EXPECT_FALSE((x * 2.0).requires_grad());
}

TEST(Engine, LeafGradientKeepsTheLeafDtype) {
  // An f32 master parameter used through an f64 compute copy gets an f32 gradient.
  Var w(vec({1, 2}, DType::f32), true);
  sum_all(cast(w, DType::f64) * 3.0).backward();
  EXPECT_EQ(w.grad().dtype(), DType::f32);
  EXPECT_TRUE(all_close(w.grad(), vec({3, 3}, DType::f32), 0));
}

TEST(Engine, RecordChecksGradientShapes) {
  Var x(vec({1, 2}), true);
  Var bad = record("bad_op", x.value().clone(), {x},
                   [](const Tensor&) -> Grads { return {Tensor::zeros({3}, DType::f64)}; });
  try {
    sum_all(bad).backward();
    FAIL() << "expected a shape error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("bad_op"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace sprig
