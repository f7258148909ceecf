// Activation checkpointing and grad(): gradients bitwise those of the unchecked graph, parameter
// hooks run once, less memory kept between forward and backward, and the refusals.
#include "autograd/checkpoint.h"

#include <gtest/gtest.h>

#include <stdexcept>

#include "autograd/functions.h"
#include "tensor/ops.h"
#include "tensor/storage.h"
#include "tests/test_util.h"

namespace sprig {
namespace {

using testing::max_abs_diff;
using testing::rand_normal;

// A residual MLP block over x (N, H) with weights w1 (H, F), w2 (F, H): x + silu(x w1) w2, with
// its intermediates (N, F) the memory checkpointing saves.
struct Block {
  Var w1, w2;
  Block(int64_t H, int64_t F, uint64_t seed)
      : w1(mul(rand_normal({H, F}, seed), 0.3), true),
        w2(mul(rand_normal({F, H}, seed + 1), 0.3), true) {}
  Var operator()(const Var& x) const {
    const Var h = matmul(x, w1);
    return x + matmul(swiglu(h, h), w2);
  }
  std::vector<Var> parameters() const { return {w1, w2}; }
};

// The loss of `blocks` over x, each block checkpointed or not; the second input `scale` is read by
// every block (fan-in across segments, like a draft's shared context).
Var run(const std::vector<Block>& blocks, const Var& x, const Var& scale, bool checkpointed) {
  Var h = x;
  for (const Block& b : blocks) {
    const Segment segment = [&b](const std::vector<Var>& in) { return b(in[0] * in[1]); };
    h = checkpointed ? checkpoint(segment, {h, scale}, b.parameters()) : segment({h, scale});
  }
  return sum_all(h * h);
}

TEST(Checkpoint, GradientsAreBitwiseThoseOfTheUncheckedGraph) {
  const std::vector<Block> blocks = {Block(8, 32, 1), Block(8, 32, 3), Block(8, 32, 5)};
  std::vector<std::vector<Tensor>> grads(2);
  for (bool checkpointed : {false, true}) {
    for (const Block& b : blocks)
      for (Var p : b.parameters()) p.zero_grad();
    Var x(rand_normal({16, 8}, 7), true), scale(rand_normal({16, 8}, 8), true);
    run(blocks, x, scale, checkpointed).backward();
    std::vector<Tensor>& g = grads[checkpointed];
    g = {x.grad(), scale.grad()};
    for (const Block& b : blocks)
      for (const Var& p : b.parameters()) g.push_back(p.grad().clone());
  }
  ASSERT_EQ(grads[0].size(), grads[1].size());
  for (size_t i = 0; i < grads[0].size(); ++i) {
    ASSERT_TRUE(grads[1][i].defined()) << i;
    EXPECT_EQ(max_abs_diff(grads[0][i], grads[1][i]), 0.0) << "gradient " << i;
  }
}

TEST(Checkpoint, AParameterOfSeveralSegmentsAccumulatesAndRunsItsHookOnce) {
  const Block shared(4, 8, 11);
  Var w1 = shared.w1;
  int hooks = 0;
  w1.set_grad_hook([&hooks] { ++hooks; });
  const Var x(rand_normal({3, 4}, 12), true), one(Tensor::ones({3, 4}, DType::f32));
  for (bool checkpointed : {false, true}) {
    w1.zero_grad();
    hooks = 0;
    run({shared, shared, shared}, x, one, checkpointed).backward();
    EXPECT_EQ(hooks, 1) << checkpointed;
  }
  const Tensor checked = w1.grad().clone();
  w1.zero_grad();
  run({shared, shared, shared}, x, one, false).backward();
  EXPECT_LT(max_abs_diff(w1.grad(), checked), 1e-5);  // three contributions, summed in any order
  w1.set_grad_hook(nullptr);
}

TEST(Checkpoint, KeepsOnlyEachSegmentsInputsUntilTheBackward) {
  const int64_t N = 256, H = 16, F = 512;  // each block keeps 2 N x F intermediates unchecked
  const std::vector<Block> blocks = {Block(H, F, 1), Block(H, F, 3), Block(H, F, 5),
                                     Block(H, F, 7)};
  const Var x(rand_normal({N, H}, 9), true), one(Tensor::ones({N, H}, DType::f32));
  size_t kept[2];
  for (bool checkpointed : {false, true}) {
    const size_t before = cpu_memory_allocated();
    const Var loss = run(blocks, x, one, checkpointed);
    kept[checkpointed] = cpu_memory_allocated() - before;
    loss.backward();
  }
  const double intermediates = 4.0 * 2 * N * F * 4;  // blocks x kept (N, F) f32 tensors
  EXPECT_GT(static_cast<double>(kept[0]), intermediates);
  EXPECT_LT(static_cast<double>(kept[1]), 0.1 * intermediates);
}

TEST(Checkpoint, WithoutGradientsItIsTheSegment) {
  const Block b(4, 8, 21);
  const Var x(rand_normal({2, 4}, 22));
  NoGradGuard no_grad;
  const Var y =
      checkpoint([&b](const std::vector<Var>& in) { return b(in[0]); }, {x}, b.parameters());
  EXPECT_FALSE(y.requires_grad());
  EXPECT_EQ(max_abs_diff(y.value(), b(x).value()), 0.0);
}

TEST(Checkpoint, ASegmentReadingAnUnlistedParameterIsRefusedInTheBackward) {
  const Block b(4, 8, 31);
  const Var x(rand_normal({2, 4}, 32), true);
  const Var y = checkpoint([&b](const std::vector<Var>& in) { return b(in[0]); }, {x}, {b.w1});
  try {
    sum_all(y).backward();
    FAIL() << "no throw";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("[grad] the graph reaches 1 leaf"), std::string::npos)
        << e.what();
  }
}

Tensor vec(const std::vector<double>& v) {
  return Tensor::from_vector(v, {static_cast<int64_t>(v.size())}, DType::f64);
}

TEST(Checkpoint, AParameterThatIsNotALeafIsRefused) {
  const Block b(4, 8, 41);
  const Var x(rand_normal({2, 4}, 42), true);
  const Var computed = b.w1 * 2.0;
  EXPECT_THROW(checkpoint([&b](const std::vector<Var>& in) { return b(in[0]); }, {x},
                          {b.w1, b.w2, computed}),
               std::invalid_argument);
}

TEST(Grad, ReturnsTheGradientsOfListedLeavesAndTouchesNone) {
  Var a(vec({1.0, 2.0}), true), b(vec({3.0, -1.0}), true), unused(vec({5.0}), true);
  int hooks = 0;
  a.set_grad_hook([&hooks] { ++hooks; });
  const Var y = a * b + a;
  const Grads g = grad(y, Tensor::ones({2}, DType::f64), {a, b, unused});
  ASSERT_EQ(g.size(), 3u);
  EXPECT_EQ(g[0].to_vector<double>(), (std::vector<double>{4.0, 0.0}));  // b + 1
  EXPECT_EQ(g[1].to_vector<double>(), (std::vector<double>{1.0, 2.0}));  // a
  EXPECT_FALSE(g[2].defined());
  EXPECT_FALSE(a.grad().defined());
  EXPECT_FALSE(b.grad().defined());
  EXPECT_EQ(hooks, 0);
  EXPECT_THROW(grad(y, Tensor::ones({2}, DType::f64), {a, b}), std::runtime_error);  // freed
  const Var z = a * b;
  EXPECT_THROW(grad(z, Tensor::ones({2}, DType::f64), {a}), std::invalid_argument);  // b unlisted
}

}  // namespace
}  // namespace sprig
