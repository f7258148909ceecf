// CPU tests of rope: forward values against exact f64 angles, HF's fp32 angles and bf16 cos/sin,
// the attention scaling, the backward as the inverse rotation and against central differences, and
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

RopeFrequencies unscaled(int64_t head_dim, double theta) {
  return rope_frequencies(head_dim, theta);
}

// Rotate-half RoPE in f64 with exact angles pos / theta^(2i/D).
std::vector<double> naive_rope(const Tensor& x, const Tensor& pos, double theta) {
  const std::vector<double> xv = x.to_vector<double>();
  const std::vector<int64_t> pv = pos.to_vector<int64_t>();
  const int64_t heads = x.size(2), D = x.size(3), half = D / 2;
  std::vector<double> y(xv.size());
  for (size_t tok = 0; tok < pv.size(); ++tok)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t i = 0; i < half; ++i) {
        const double angle = pv[tok] / std::pow(theta, 2.0 * i / D);
        const size_t a = (tok * heads + h) * D + i, b = a + half;
        y[a] = xv[a] * std::cos(angle) - xv[b] * std::sin(angle);
        y[b] = xv[b] * std::cos(angle) + xv[a] * std::sin(angle);
      }
  return y;
}

TEST(Rope, PositionZeroIsIdentity) {
  for (DType dt : {DType::f32, DType::bf16}) {
    const Tensor x = rand_normal({2, 3, 2, 8}, 20, dt);
    EXPECT_TRUE(all_close(rope(x, Tensor::zeros({2, 3}, DType::i64), unscaled(8, 1e4)), x, 0.0));
  }
}

TEST(Rope, MatchesNaiveF64) {
  const Tensor x = rand_normal({2, 3, 2, 8}, 21);
  const Tensor pos = Tensor::from_vector<int64_t>({0, 1, 2, 7, 30, 50}, {2, 3});
  const Tensor expected = Tensor::from_vector(naive_rope(x, pos, 1e4), x.shape(), DType::f32);
  EXPECT_TRUE(all_close(rope(x, pos, unscaled(8, 1e4)), expected, 2e-5));
  // i32 positions and a non-contiguous x give the same result.
  EXPECT_TRUE(
      all_close(rope(non_contiguous(x), pos.to(DType::i32), unscaled(8, 1e4)), expected, 2e-5));
}

TEST(Rope, AnglesAreFp32ProductsLikeHF) {
  // D = 4: inv_freq[1] = float(1 / 100) = 0.0099999998; the angle at position 1000003 is the fp32
  // product 10000.029296875, whose cosine differs from the exact angle's by 2.3e-4.
  Tensor x = Tensor::zeros({1, 1, 1, 4});
  x.narrow(3, 1, 1).fill_(1.0);
  const Tensor y = rope(x, Tensor::from_vector<int64_t>({1000003}, {1, 1}), unscaled(4, 1e4));
  const std::vector<float> yv = y.to_vector<float>();
  EXPECT_NEAR(yv[1], -0.9427945, 1e-6);  // cos(10000.029296875)
  EXPECT_NEAR(yv[3], -0.3333744, 1e-6);  // sin(10000.029296875)
}

TEST(Rope, Bf16RoundsCosSinBeforeUse) {
  // pos 1, D = 2: cos(1) -> bf16 0.5390625, sin(1) -> bf16 0.83984375; x = (3, 2) gives
  // y1 = 3c - 2s = -0.0625 and y2 = 2c + 3s -> bf16 3.59375 (exact angles: -0.0620117, 3.609375).
  const Tensor x = Tensor::from_vector<float>({3, 2}, {1, 1, 1, 2}, DType::bf16);
  const Tensor y = rope(x, Tensor::from_vector<int64_t>({1}, {1, 1}), unscaled(2, 1e4));
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{-0.0625f, 3.59375f}));
}

TEST(Rope, AttentionScalingScalesCosAndSinInFp32BeforeTheRounding) {
  // bf16, pos 1, D = 2, scale 1.25: cos(1) * 1.25 = 0.67538 -> bf16 0.67578125, sin(1) * 1.25 =
  // 1.05184 -> bf16 1.0546875; x = (1, 0) gives (c, s).
  RopeFrequencies f = unscaled(2, 1e4);
  f.attention_scaling = 1.25f;
  const Tensor x = Tensor::from_vector<float>({1, 0}, {1, 1, 1, 2}, DType::bf16);
  const Tensor pos = Tensor::from_vector<int64_t>({1}, {1, 1});
  EXPECT_EQ(rope(x, pos, f).to_vector<float>(), (std::vector<float>{0.67578125f, 1.0546875f}));
  // The backward is the transposed rotation, scaled the same: rope_backward(rope(x)) = s^2 x.
  const Tensor x32 = rand_normal({1, 3, 2, 8}, 26);
  const Tensor p3 = Tensor::from_vector<int64_t>({0, 5, 900}, {1, 3});
  f = unscaled(8, 1e4);
  f.attention_scaling = 1.25f;
  EXPECT_TRUE(all_close(rope_backward(rope(x32, p3, f), p3, f), mul(x32, 1.5625), 1e-5));
}

TEST(Rope, BackwardInvertsForward) {
  const Tensor x = rand_normal({2, 5, 3, 16}, 22);
  const Tensor pos = testing::rand_uniform({2, 5}, 0, 4096, 23).to(DType::i64);
  EXPECT_TRUE(
      all_close(rope_backward(rope(x, pos, unscaled(16, 1e6)), pos, unscaled(16, 1e6)), x, 1e-5));
}

TEST(Rope, BackwardMatchesFiniteDifferences) {
  const Tensor x = rand_normal({1, 2, 2, 6}, 24, DType::f64);
  const Tensor dy = rand_normal({1, 2, 2, 6}, 25, DType::f64);
  const Tensor pos = Tensor::from_vector<int64_t>({3, 11}, {1, 2});
  const auto loss = [&] { return dot(rope(x, pos, unscaled(6, 1e4)), dy); };
  EXPECT_TRUE(all_close(rope_backward(dy, pos, unscaled(6, 1e4)), numeric_gradient(loss, x), 1e-8));
}

TEST(Rope, RejectsBadInputs) {
  const Tensor pos = Tensor::zeros({2, 3}, DType::i64);
  EXPECT_TRUE(throws_invalid(
      [&] {
        rope(Tensor::zeros({2, 3, 1, 5}), pos, unscaled(4, 1e4));
      },
      "[rope] head dim must be even, got 5"));
  const Tensor x = Tensor::zeros({2, 3, 1, 4});
  EXPECT_TRUE(throws_invalid(
      [&] {
        rope(x, Tensor::zeros({3, 2}, DType::i64), unscaled(4, 1e4));
      },
      "[rope] pos must have shape [2, 3], got [3, 2]"));
  EXPECT_TRUE(throws_invalid(
      [&] {
        rope(x, Tensor::zeros({2, 3}), unscaled(4, 1e4));
      },
      "[rope] pos must be i32 or i64, got f32"));
  EXPECT_TRUE(throws_invalid(
      [&] {
        rope(Tensor::zeros({2, 3, 4}), pos, unscaled(4, 1e4));
      },
      "[rope] x must have 4 dimensions, got 3"));
  EXPECT_TRUE(throws_invalid(
      [&] {
        rope_backward(Tensor::zeros({2, 3, 1, 3}), pos, unscaled(4, 1e4));
      },
      "[rope_backward] head dim must be even, got 3"));
  EXPECT_TRUE(throws_invalid([&] { rope(x, pos, unscaled(8, 1e4)); },
                             "[rope] 4 frequencies for head dim 4: one per pair of dimensions"));
  RopeFrequencies bad = unscaled(4, 1e4);
  bad.attention_scaling = 0;
  EXPECT_TRUE(throws_invalid([&] { rope(x, pos, bad); },
                             "[rope] attention_scaling must be finite and positive, got 0"));
  bad = unscaled(4, 1e4);
  bad.inv_freq[1] = std::nanf("");
  EXPECT_TRUE(throws_invalid([&] { rope(x, pos, bad); },
                             "[rope] inverse frequencies must be finite and >= 0"));
}

}  // namespace
}  // namespace sprig
