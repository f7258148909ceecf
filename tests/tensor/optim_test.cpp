// CPU tests of the optimizer ops: global norm and clipping (torch.nn.utils.clip_grad_norm_
// semantics) and AdamW against a naive f64 re-implementation of torch.optim.AdamW.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "tensor/ops.h"
#include "tests/tensor/op_test_util.h"
#include "tests/test_util.h"

namespace sprig {
namespace {

using testing::all_close;
using testing::non_contiguous;
using testing::rand_normal;
using testing::rand_uniform;
using testing::throws_invalid;

// ---- norms and clipping -------------------------------------------------------------------------

TEST(GlobalNorm, SumsSquaresOverTensorsOfAnyFloatingDtype) {
  // 3^2 + 4^2 + 1^2 + 2^2 + 2^2 = 34.
  const std::vector<Tensor> ts = {
      Tensor::from_vector<float>({3, 4}, {2}), Tensor::from_vector<double>({1, 2}, {1, 2}),
      Tensor::from_vector<float>({2}, {1}, DType::bf16), Tensor::zeros({0})};
  EXPECT_NEAR(global_norm(ts), std::sqrt(34.0), 1e-12);
  EXPECT_EQ(global_norm({}), 0.0);
  // Strided tensors count their own elements only.
  EXPECT_NEAR(global_norm({non_contiguous(Tensor::from_vector<float>({3, 4}, {1, 2}))}), 5.0,
              1e-12);
}

TEST(ClipGradNorm, ScalesAboveMaxNorm) {
  const Tensor a = Tensor::from_vector<float>({3, 0}, {2});
  const Tensor b = Tensor::from_vector<float>({4}, {1});
  EXPECT_NEAR(clip_grad_norm({a, b}, 1.0), 5.0, 1e-12);  // returns the norm before clipping
  const double coef = 1.0 / (5.0 + 1e-6);
  EXPECT_TRUE(all_close(a, Tensor::from_vector<double>({3 * coef, 0}, {2}, DType::f32), 1e-7));
  EXPECT_TRUE(all_close(b, Tensor::from_vector<double>({4 * coef}, {1}, DType::f32), 1e-7));
  EXPECT_NEAR(global_norm({a, b}), 1.0, 1e-6);
}

TEST(ClipGradNorm, ScalesBf16Gradients) {
  // norm 5 (3, 4), max 2.5: both halve (exactly representable in bf16).
  const Tensor a = Tensor::from_vector<float>({3, 4}, {2}, DType::bf16);
  EXPECT_NEAR(clip_grad_norm({a}, 2.5 + 5e-7), 5.0, 1e-12);
  EXPECT_EQ(a.dtype(), DType::bf16);
  EXPECT_EQ(a.to_vector<float>(), (std::vector<float>{1.5f, 2.0f}));
}

TEST(ClipGradNorm, LeavesGradientsBelowMaxNorm) {
  const Tensor a = Tensor::from_vector<float>({3, 4}, {2});
  EXPECT_NEAR(clip_grad_norm({a}, 5.5), 5.0, 1e-12);
  EXPECT_EQ(a.to_vector<float>(), (std::vector<float>{3, 4}));
}

TEST(ClipGradNorm, CoefficientIsOneBelowMaxNormAndForNonFiniteNorms) {
  EXPECT_DOUBLE_EQ(clip_coefficient(5.0, 1.0), 1.0 / (5.0 + 1e-6));
  EXPECT_EQ(clip_coefficient(5.0, 5.5), 1.0);
  EXPECT_EQ(clip_coefficient(0.0, 1.0), 1.0);
  EXPECT_EQ(clip_coefficient(INFINITY, 1.0), 1.0);
  EXPECT_EQ(clip_coefficient(NAN, 1.0), 1.0);
}

TEST(ClipGradNorm, RejectsNonContiguousGradients) {
  EXPECT_TRUE(throws_invalid(
      [&] {
        clip_grad_norm({non_contiguous(Tensor::ones({2, 3}))}, 1.0);
      },
      "[clip_grad_norm] gradient 0 must be contiguous"));
}

// ---- AdamW --------------------------------------------------------------------------------------

TEST(AdamW, FirstStepMovesByLrTimesSign) {
  // Step 1 from zero moments: m_hat = g, v_hat = g^2, so p -= lr * g / (|g| + eps).
  const Tensor p = Tensor::from_vector<float>({1, 1}, {2});
  const Tensor g = Tensor::from_vector<float>({0.5f, -2}, {2});
  const Tensor m = Tensor::zeros({2}), v = Tensor::zeros({2});
  adamw_step(p, g, m, v, {.lr = 0.1});
  EXPECT_TRUE(all_close(p, Tensor::from_vector<float>({0.9f, 1.1f}, {2}), 1e-6));
  EXPECT_TRUE(all_close(m, Tensor::from_vector<float>({0.05f, -0.2f}, {2}), 1e-7));
  EXPECT_TRUE(all_close(v, Tensor::from_vector<float>({0.00025f, 0.004f}, {2}), 1e-9));
}

TEST(AdamW, MatchesNaiveF64OverThreeStepsWithWeightDecay) {
  const AdamWParams base{.lr = 0.01, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.1};
  const Tensor p = rand_normal({2, 5}, 1), m = Tensor::zeros({2, 5}), v = Tensor::zeros({2, 5});
  std::vector<double> ep = p.to_vector<double>(), em(10, 0.0), ev(10, 0.0);
  for (int64_t step = 1; step <= 3; ++step) {
    const Tensor g = rand_normal({2, 5}, 100 + step);
    const std::vector<double> gv = g.to_vector<double>();
    AdamWParams hp = base;
    hp.step = step;
    adamw_step(p, g, m, v, hp);
    const double bc1 = 1 - std::pow(hp.beta1, step), bc2 = 1 - std::pow(hp.beta2, step);
    for (int i = 0; i < 10; ++i) {
      ep[i] *= 1 - hp.lr * hp.weight_decay;
      em[i] = hp.beta1 * em[i] + (1 - hp.beta1) * gv[i];
      ev[i] = hp.beta2 * ev[i] + (1 - hp.beta2) * gv[i] * gv[i];
      ep[i] -= hp.lr * (em[i] / bc1) / (std::sqrt(ev[i] / bc2) + hp.eps);
    }
  }
  EXPECT_TRUE(all_close(p, Tensor::from_vector(ep, {2, 5}, DType::f32), 1e-6, 1e-6));
  EXPECT_TRUE(all_close(m, Tensor::from_vector(em, {2, 5}, DType::f32), 1e-6, 1e-6));
  EXPECT_TRUE(all_close(v, Tensor::from_vector(ev, {2, 5}, DType::f32), 1e-7, 1e-6));
}

TEST(AdamW, Bf16GradientAndComputeCopy) {
  const AdamWParams hp{.lr = 0.01, .weight_decay = 0.01, .step = 4};
  const Tensor g = rand_normal({7}, 2, DType::bf16);
  const Tensor p1 = rand_normal({7}, 3), m1 = rand_normal({7}, 4), v1 = rand_uniform({7}, 0, 1, 5);
  const Tensor p2 = p1.clone(), m2 = m1.clone(), v2 = v1.clone();
  const Tensor copy = Tensor::zeros({7}, DType::bf16);
  adamw_step(p1, g, m1, v1, hp, copy);
  adamw_step(p2, g.to(DType::f32), m2, v2, hp);
  EXPECT_TRUE(all_close(p1, p2, 0.0));  // a bf16 gradient is read exactly as its f32 value
  EXPECT_TRUE(all_close(copy, p2.to(DType::bf16), 0.0));
}

TEST(AdamW, GradScaleMultipliesTheGradientAsItIsRead) {
  // 0.25 is exact in fp32: the scaled update equals the update of the pre-scaled gradient bit for
  // bit, and the gradient itself is left as it was.
  const AdamWParams hp{.lr = 0.01, .weight_decay = 0.01, .step = 2};
  const Tensor g = rand_normal({9}, 6);
  const Tensor p1 = rand_normal({9}, 7), m1 = rand_normal({9}, 8), v1 = rand_uniform({9}, 0, 1, 9);
  const Tensor p2 = p1.clone(), m2 = m1.clone(), v2 = v1.clone(), g_before = g.clone();
  AdamWParams scaled = hp;
  scaled.grad_scale = 0.25;
  adamw_step(p1, g, m1, v1, scaled);
  adamw_step(p2, binary_scalar(BinaryOp::mul, g, 0.25), m2, v2, hp);
  EXPECT_TRUE(all_close(p1, p2, 0.0));
  EXPECT_TRUE(all_close(m1, m2, 0.0));
  EXPECT_TRUE(all_close(v1, v2, 0.0));
  EXPECT_TRUE(all_close(g, g_before, 0.0));
}

TEST(AdamW, RejectsBadInputs) {
  const Tensor p = Tensor::zeros({3}), m = Tensor::zeros({3}), v = Tensor::zeros({3});
  EXPECT_TRUE(throws_invalid([&] { adamw_step(p.to(DType::bf16), p, m, v, {}); },
                             "[adamw_step] param must be f32, got bf16"));
  EXPECT_TRUE(throws_invalid([&] { adamw_step(p, Tensor::zeros({4}), m, v, {}); },
                             "[adamw_step] grad must have shape [3], got [4]"));
  EXPECT_TRUE(throws_invalid([&] { adamw_step(p, p, m, v, {.grad_scale = NAN}); },
                             "[adamw_step] grad_scale must be finite and >= 0, got nan"));
  EXPECT_TRUE(throws_invalid([&] { adamw_step(p, p.to(DType::f16), m, v, {}); },
                             "[adamw_step] grad must be f32 or bf16, got f16"));
  EXPECT_TRUE(throws_invalid([&] { adamw_step(p, p, m, v, {}, Tensor::zeros({3})); },
                             "[adamw_step] compute_copy must be bf16 or f16, got f32"));
  EXPECT_TRUE(throws_invalid([&] { adamw_step(p, p, m, v, {.step = 0}); },
                             "[adamw_step] step must be >= 1, got 0"));
}

}  // namespace
}  // namespace sprig
