// The AdamW optimizer class against a naive f64 AdamW: fp32 parameters, bf16 parameters with fp32
// masters (the compute copy always equals the master cast to bf16), parameters without gradients,
// and the state round trip a checkpoint relies on.
#include "train/optimizer.h"

#include <gtest/gtest.h>

#include <cmath>

#include "autograd/functions.h"
#include "tests/test_util.h"

namespace sprig {
namespace {

using testing::rand_normal;

const AdamWConfig kConfig{/*lr=*/0.0, /*beta1=*/0.8, /*beta2=*/0.95, /*eps=*/1e-6,
                          /*weight_decay=*/0.1};

// torch.optim.AdamW in f64 on host vectors.
struct NaiveAdamW {
  std::vector<double> p, m, v;
  int64_t t = 0;

  explicit NaiveAdamW(std::vector<double> start)
      : p(std::move(start)), m(p.size(), 0.0), v(p.size(), 0.0) {}

  void step(const std::vector<double>& g, double lr, const AdamWConfig& c) {
    ++t;
    const double c1 = 1.0 - std::pow(c.beta1, static_cast<double>(t));
    const double c2 = 1.0 - std::pow(c.beta2, static_cast<double>(t));
    for (size_t i = 0; i < p.size(); ++i) {
      m[i] = c.beta1 * m[i] + (1.0 - c.beta1) * g[i];
      v[i] = c.beta2 * v[i] + (1.0 - c.beta2) * g[i] * g[i];
      p[i] -= lr * (c.weight_decay * p[i] + (m[i] / c1) / (std::sqrt(v[i] / c2) + c.eps));
    }
  }
};

// Sets p's gradient to `g` (f32, p's shape) by backpropagating sum(cast(p, f32) * g).
void set_grad(Var& p, const Tensor& g) {
  p.zero_grad();
  sum_all(cast(p, DType::f32) * Var(g)).backward();
}

// Random gradients that bf16 holds exactly, so both implementations see the same values.
Tensor bf16_exact_grad(const Shape& shape, uint64_t seed) {
  return rand_normal(shape, seed).to(DType::bf16).to(DType::f32);
}

TEST(AdamW, MatchesNaiveF64WithWeightDecay) {
  const Tensor start = rand_normal({3, 5}, 1);
  Var p(start.clone(), true);
  AdamW opt({{"w", p}}, kConfig);
  NaiveAdamW ref(start.to_vector<double>());
  const double lrs[] = {1e-2, 5e-3, 2e-2, 1e-3};
  for (int k = 0; k < 4; ++k) {
    const Tensor g = rand_normal({3, 5}, 10 + k);
    set_grad(p, g);
    opt.step(lrs[k]);
    ref.step(g.to_vector<double>(), lrs[k], kConfig);
    EXPECT_TRUE(testing::all_close(p.value().to(DType::f64), Tensor::from_vector(ref.p, {3, 5}),
                                   1e-6, 1e-6))
        << "step " << k + 1;
  }
  EXPECT_EQ(opt.steps_taken(), 4);
  // The moments match too.
  EXPECT_TRUE(testing::all_close(opt.moments().at("w.exp_avg").to(DType::f64),
                                 Tensor::from_vector(ref.m, {3, 5}), 1e-6, 1e-6));
  EXPECT_TRUE(testing::all_close(opt.moments().at("w.exp_avg_sq").to(DType::f64),
                                 Tensor::from_vector(ref.v, {3, 5}), 1e-6, 1e-6));
}

TEST(AdamW, Bf16ParameterFollowsItsFp32Master) {
  const Tensor start = rand_normal({4, 6}, 2);  // f32 values bf16 cannot hold exactly
  Var p(start.to(DType::bf16), true);
  AdamW opt({{"w", p}}, kConfig, {{"w", start}});
  NaiveAdamW ref(start.to_vector<double>());
  for (int k = 0; k < 4; ++k) {
    const Tensor g = bf16_exact_grad({4, 6}, 20 + k);
    set_grad(p, g);
    ASSERT_EQ(p.grad().dtype(), DType::bf16);
    opt.step(1e-2);
    ref.step(g.to_vector<double>(), 1e-2, kConfig);
    const Tensor master = opt.masters().at("w");
    ASSERT_EQ(master.dtype(), DType::f32);
    // The master keeps the full-precision trajectory (small steps bf16 would round away).
    EXPECT_TRUE(
        testing::all_close(master.to(DType::f64), Tensor::from_vector(ref.p, {4, 6}), 1e-6, 1e-6))
        << "step " << k + 1;
    EXPECT_EQ(
        testing::max_abs_diff(p.value().to(DType::f32), master.to(DType::bf16).to(DType::f32)), 0.0)
        << "step " << k + 1;
  }
}

TEST(AdamW, ParametersWithoutGradientsAreLeftAlone) {
  Var a(rand_normal({3}, 3), true), b(rand_normal({2}, 4), true);
  const Tensor b_before = b.value().clone();
  AdamW opt({{"a", a}, {"b", b}}, kConfig);
  set_grad(a, rand_normal({3}, 5));
  opt.step(1e-2);
  EXPECT_EQ(testing::max_abs_diff(b.value(), b_before), 0.0);
  EXPECT_DOUBLE_EQ(opt.grad_norm(), global_norm({a.grad()}));
  EXPECT_EQ(testing::max_abs_diff(opt.moments().at("b.exp_avg"), Tensor::zeros({2})), 0.0);
}

TEST(AdamW, StateRoundTripContinuesIdentically) {
  const Tensor start = rand_normal({5}, 6);
  Var p1(start.clone(), true), p2(rand_normal({5}, 7), true);
  AdamW first({{"w", p1}}, kConfig);
  for (int k = 0; k < 3; ++k) {
    set_grad(p1, rand_normal({5}, 30 + k));
    first.step(1e-2);
  }
  // A second optimizer (other start values) restored from the first one's state.
  AdamW second({{"w", p2}}, kConfig);
  second.load_state(first.masters(), first.moments(), first.steps_taken());
  EXPECT_EQ(second.steps_taken(), 3);
  EXPECT_EQ(testing::max_abs_diff(p2.value(), p1.value()), 0.0);
  for (int k = 0; k < 2; ++k) {
    const Tensor g = rand_normal({5}, 40 + k);
    set_grad(p1, g);
    set_grad(p2, g);
    first.step(1e-2);
    second.step(1e-2);
  }
  EXPECT_EQ(testing::max_abs_diff(p2.value(), p1.value()), 0.0);
}

TEST(AdamW, BadStatesAndMissingMastersAreErrors) {
  Var p(rand_normal({5}, 8), true);
  AdamW opt({{"w", p}}, kConfig);
  const auto moments = opt.moments();
  EXPECT_THROW(opt.load_state({}, moments, 1), std::runtime_error);
  try {
    opt.load_state({{"w", Tensor::zeros({4})}}, moments, 1);
    FAIL() << "a mis-shaped master loaded";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "the checkpoint's \"w\" has shape [4], expected [5]");
  }
  Var half(rand_normal({2}, 9).to(DType::bf16), true);
  EXPECT_EQ(testing::invalid_argument_message([&] {
              AdamW({{"h", half}}, kConfig);
            }),
            "[AdamW] parameter h is bf16 and has no fp32 master");
}

}  // namespace
}  // namespace sprig
