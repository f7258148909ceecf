// End to end: a 2-layer MLP (f32) trained with plain SGD through Var ops, and gradient
// accumulation over micro-batches matching the full batch.
#include <gtest/gtest.h>

#include "autograd/functions.h"
#include "tests/test_util.h"

namespace sprig {
namespace {

using testing::all_close;
using testing::rand_normal;

constexpr int64_t kRows = 8, kIn = 4, kHidden = 16, kClasses = 3;

struct Mlp {
  Var w1{mul(rand_normal({kIn, kHidden}, 1), 0.5), true};
  Var b1{Tensor::zeros({kHidden}), true};
  Var w2{mul(rand_normal({kHidden, kClasses}, 2), 0.5), true};
  Var b2{Tensor::zeros({kClasses}), true};

  std::vector<Var> params() const { return {w1, b1, w2, b2}; }

  // Summed per-row cross-entropy of x [R, kIn] against targets [R].
  Var loss_sum(const Tensor& x, const Tensor& targets) const {
    const Var h = tanh(matmul(Var(x), w1) + b1);  // (R, kHidden)
    const Var logits = matmul(h, w2) + b2;        // (R, kClasses)
    return sum_all(cross_entropy(logits, targets));
  }
};

const Tensor& inputs() {
  static const Tensor x = rand_normal({kRows, kIn}, 3);
  return x;
}
const Tensor& targets() {
  static const Tensor t = Tensor::from_vector<int64_t>({0, 1, 2, 0, 1, 2, 2, 1}, {kRows});
  return t;
}

TEST(Mlp, SgdReducesTheLoss) {
  Mlp model;
  const double lr = 0.1;
  double first = 0, last = 0;
  for (int step = 0; step < 40; ++step) {
    Var loss = model.loss_sum(inputs(), targets()) / static_cast<double>(kRows);
    loss.backward();
    last = loss.value().item();
    if (step == 0) first = last;
    NoGradGuard no_grad;
    for (Var& p : model.params()) {
      p.value().copy_(sub(p.value(), mul(p.grad(), lr)));
      p.zero_grad();
    }
  }
  EXPECT_GT(first, 0.8);
  EXPECT_LT(last, 0.3 * first) << "loss went from " << first << " to " << last;
}

TEST(Mlp, MicroBatchAccumulationMatchesTheFullBatch) {
  Mlp full, micro;
  full.loss_sum(inputs(), targets()).backward();
  for (int64_t start : {int64_t{0}, kRows / 2})
    micro.loss_sum(inputs().narrow(0, start, kRows / 2), targets().narrow(0, start, kRows / 2))
        .backward();
  const std::vector<Var> a = full.params(), b = micro.params();
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(b[i].grad().dtype(), DType::f32);
    EXPECT_TRUE(all_close(b[i].grad(), a[i].grad(), 1e-5, 1e-5)) << "parameter " << i;
  }
}

}  // namespace
}  // namespace sprig
