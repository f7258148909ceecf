// CPU tests of rms_norm: forward values (hand-computed, or a naive f64 formula written here),
// HF's bf16 rounding before the weight, backward against central differences in f64, and
// argument errors.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "autograd/gradcheck.h"
#include "tensor/ops.h"
#include "tests/tensor/op_test_util.h"
#include "tests/test_util.h"

namespace sprig {
namespace {

using testing::all_close;
using testing::dot;
using testing::non_contiguous;
using testing::rand_normal;
using testing::throws_invalid;

// Rounds a value to bf16 and back.
double to_bf16(double v) { return static_cast<float>(bf16(static_cast<float>(v))); }

// y = w * x / sqrt(mean(x^2) + eps) per row of H, in f64.
std::vector<double> naive_rms_norm(const Tensor& x, const Tensor& w, double eps) {
  const std::vector<double> xv = x.to_vector<double>(), wv = w.to_vector<double>();
  const size_t H = wv.size();
  std::vector<double> y(xv.size());
  for (size_t r = 0; r < xv.size() / H; ++r) {
    double ss = 0;
    for (size_t h = 0; h < H; ++h) ss += xv[r * H + h] * xv[r * H + h];
    const double rstd = 1.0 / std::sqrt(ss / H + eps);
    for (size_t h = 0; h < H; ++h) y[r * H + h] = wv[h] * xv[r * H + h] * rstd;
  }
  return y;
}

TEST(RmsNorm, HandComputedValues) {
  // mean(x^2) = 30 / 4 = 7.5, rstd = 1 / sqrt(7.5) = 0.3651484.
  const Tensor x = Tensor::from_vector<float>({1, 2, 3, 4}, {1, 4});
  const Tensor w = Tensor::from_vector<float>({1, 1, 2, 0.5f}, {4});
  const auto [y, rstd] = rms_norm(x, w, 0.0);
  EXPECT_TRUE(all_close(rstd, Tensor::from_vector<float>({0.3651484f}, {1}), 1e-6));
  EXPECT_TRUE(all_close(
      y, Tensor::from_vector<float>({0.3651484f, 0.7302967f, 2.1908902f, 0.7302967f}, {1, 4}),
      1e-6));
}

TEST(RmsNorm, MatchesNaiveF64WithLeadingDims) {
  for (DType dt : {DType::f64, DType::f32}) {
    const Tensor x = rand_normal({2, 3, 5}, 1, dt), w = rand_normal({5}, 2, dt);
    const auto [y, rstd] = rms_norm(x, w, 1e-5);
    EXPECT_EQ(y.shape(), x.shape());
    EXPECT_EQ(rstd.shape(), Shape{6});
    EXPECT_EQ(rstd.dtype(), dt == DType::f64 ? DType::f64 : DType::f32);
    const Tensor expected = Tensor::from_vector(naive_rms_norm(x, w, 1e-5), x.shape(), dt);
    EXPECT_TRUE(all_close(y, expected, dt == DType::f64 ? 1e-12 : 1e-6)) << dtype_name(dt);
  }
}

TEST(RmsNorm, Bf16CastsBeforeWeight) {
  const Tensor x = rand_normal({4, 64}, 3, DType::bf16), w = rand_normal({64}, 4, DType::bf16);
  const auto [y, rstd] = rms_norm(x, w, 1e-6);
  const std::vector<double> xv = x.to_vector<double>(), wv = w.to_vector<double>();
  const std::vector<double> rs = rstd.to_vector<double>(), yv = y.to_vector<double>();
  int differs_from_single_rounding = 0;
  for (size_t i = 0; i < xv.size(); ++i) {
    const double n = static_cast<float>(xv[i] * rs[i / 64]);
    const double hf = to_bf16(wv[i % 64] * to_bf16(n));  // HF: bf16(x * rstd), then * w
    EXPECT_EQ(yv[i], hf) << "element " << i;
    differs_from_single_rounding += to_bf16(wv[i % 64] * n) != hf;
  }
  // The order of rounding is visible in bf16, so the check above discriminates.
  EXPECT_GT(differs_from_single_rounding, 0);
}

TEST(RmsNorm, NonContiguousInputMatchesContiguous) {
  const Tensor x = rand_normal({6, 8}, 5), w = rand_normal({8}, 6);
  EXPECT_TRUE(
      all_close(rms_norm(non_contiguous(x), w, 1e-6).first, rms_norm(x, w, 1e-6).first, 0.0));
}

TEST(RmsNorm, BackwardMatchesFiniteDifferences) {
  const Tensor x = rand_normal({3, 7}, 7, DType::f64), w = rand_normal({7}, 8, DType::f64);
  const Tensor dy = rand_normal({3, 7}, 9, DType::f64);
  const double eps = 1e-3;
  const auto loss = [&] { return dot(rms_norm(x, w, eps).first, dy); };
  const Tensor dw = Tensor::ones({7}, DType::f64);  // backward accumulates into dw
  const Tensor dx = rms_norm_backward(dy, x, w, rms_norm(x, w, eps).second, dw);
  EXPECT_TRUE(all_close(dx, numeric_gradient(loss, x), 1e-8));
  std::vector<double> expected_dw = numeric_gradient(loss, w).to_vector<double>();
  for (double& v : expected_dw) v += 1.0;
  EXPECT_TRUE(all_close(dw, Tensor::from_vector(expected_dw, {7}), 1e-8));
}

// No features: an empty dx, and nothing added to the empty dw (no kernel runs on either device).
TEST(RmsNorm, BackwardWithoutFeatures) {
  const Tensor dx = rms_norm_backward(Tensor::zeros({3, 0}), Tensor::zeros({3, 0}),
                                      Tensor::zeros({0}), Tensor::ones({3}), Tensor::zeros({0}));
  EXPECT_EQ(dx.shape(), (Shape{3, 0}));
}

TEST(RmsNorm, BackwardBf16WithF32WeightGradient) {
  const Tensor x = rand_normal({5, 32}, 10, DType::bf16), w = rand_normal({32}, 11, DType::bf16);
  const Tensor dy = rand_normal({5, 32}, 12, DType::bf16);
  const Tensor dw = Tensor::zeros({32}, DType::f32), dw_ref = Tensor::zeros({32}, DType::f32);
  const Tensor dx = rms_norm_backward(dy, x, w, rms_norm(x, w, 1e-6).second, dw);
  const Tensor x32 = x.to(DType::f32), w32 = w.to(DType::f32);
  const Tensor dx_ref =
      rms_norm_backward(dy.to(DType::f32), x32, w32, rms_norm(x32, w32, 1e-6).second, dw_ref);
  EXPECT_EQ(dx.dtype(), DType::bf16);
  EXPECT_TRUE(all_close(dx, dx_ref, 1e-2, 1e-2));
  EXPECT_TRUE(all_close(dw, dw_ref, 1e-5, 1e-5));  // same f32 math on the same values
}

TEST(RmsNorm, RejectsBadInputs) {
  const Tensor x = Tensor::zeros({2, 4}), w = Tensor::ones({4});
  EXPECT_TRUE(throws_invalid([&] { rms_norm(x, Tensor::ones({3}), 1e-6); },
                             "[rms_norm] weight has 3 elements, x's last dimension is 4"));
  EXPECT_TRUE(throws_invalid([&] { rms_norm(x, Tensor::ones({4}, DType::f64), 1e-6); },
                             "[rms_norm] dtype mismatch: f32 and f64"));
  EXPECT_TRUE(throws_invalid(
      [&] {
        rms_norm(x, Tensor::ones({1, 4}), 1e-6);
      },
      "[rms_norm] weight must have 1 dimensions"));
  EXPECT_TRUE(throws_invalid(
      [&] {
        rms_norm(Tensor::zeros({2, 4}, DType::i64), w, 1e-6);
      },
      "[rms_norm] x must be a floating tensor"));
  const Tensor rstd = rms_norm(x, w, 1e-6).second;
  const Tensor dw = Tensor::zeros({4});
  EXPECT_TRUE(
      throws_invalid([&] { rms_norm_backward(x, x, w, rstd, Tensor::zeros({4}, DType::f64)); },
                     "[rms_norm_backward] dw must be f32 or the weight's dtype f32, got f64"));
  EXPECT_TRUE(throws_invalid([&] { rms_norm_backward(x, x, w, Tensor::zeros({3}), dw); },
                             "[rms_norm_backward] rstd must have shape [2]"));
  EXPECT_TRUE(throws_invalid(
      [&] {
        rms_norm_backward(Tensor::zeros({2, 3}), x, w, rstd, dw);
      },
      "[rms_norm_backward] dy must have shape [2, 4]"));
}

}  // namespace
}  // namespace sprig
