// The vectorised transcendental math of the CPU kernels (Eigen's exp) against the f64 definition:
// SwiGLU and its backward within 4 f32 ulps of the exact result; softmax and log_softmax, whose
// f32 row sums round however exp is computed, no further from it than the scalar f32 computation
// (std::exp, a sequential sum) plus 2 ulps; exact zeros for -inf logits; the unary exp, log,
// sigmoid and SiLU (and SiLU's backward) within 4 ulps, tanh within 6; RoPE's cos and sin within
// 2^-23 (two ulps of 1).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "tensor/kernel_params.h"
#include "tensor/ops.h"
#include "tests/test_util.h"

namespace sprig {
namespace {

// The largest |got - want| in ulps of want (f32), over all elements.
double max_ulps(const Tensor& got, const std::vector<double>& want) {
  const std::vector<float> g = got.to_vector<float>();
  double worst = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const float w = static_cast<float>(want[i]);
    const double ulp =
        std::nextafter(std::abs(w), std::numeric_limits<float>::infinity()) - std::abs(w);
    if (w == 0) continue;
    worst = std::max(worst, std::abs(static_cast<double>(g[i]) - want[i]) / ulp);
  }
  return worst;
}

double max_abs(const std::vector<float>& got, const std::vector<double>& want) {
  double worst = 0;
  for (size_t i = 0; i < want.size(); ++i)
    worst = std::max(worst, std::abs(static_cast<double>(got[i]) - want[i]));
  return worst;
}

TEST(VectorMath, SoftmaxAndLogSoftmaxAsCloseAsTheScalarComputation) {
  constexpr int64_t R = 64, V = 1000;
  const Tensor x = mul(testing::rand_normal({R, V}, 1), 4.0);
  const std::vector<float> xv = x.to_vector<float>();
  std::vector<double> p(xv.size()), logp(xv.size());
  std::vector<float> p32(xv.size()), logp32(xv.size());
  for (int64_t r = 0; r < R; ++r) {
    const float* row = xv.data() + r * V;
    const float m = *std::max_element(row, row + V);
    double s = 0;
    float s32 = 0;
    for (int64_t v = 0; v < V; ++v) {
      s += std::exp(static_cast<double>(row[v]) - m);
      s32 += std::exp(row[v] - m);
    }
    for (int64_t v = 0; v < V; ++v) {
      p[r * V + v] = std::exp(static_cast<double>(row[v]) - m) / s;
      logp[r * V + v] = row[v] - m - std::log(s);
      p32[r * V + v] = std::exp(row[v] - m) / s32;
      logp32[r * V + v] = row[v] - (m + std::log(s32));
    }
  }
  const double scalar = max_ulps(Tensor::from_vector(p32, {R, V}), p);
  const double scalar_log = max_abs(logp32, logp);
  EXPECT_LE(max_ulps(softmax(x, 1), p), scalar + 2.0) << "scalar f32: " << scalar;
  EXPECT_LE(max_abs(log_softmax(x, 1).to_vector<float>(), logp), 2.0 * scalar_log + 1e-6)
      << "scalar f32: " << scalar_log;
  // -inf logits get probability exactly 0 (and its gradient 0).
  Tensor masked = x.clone();
  masked.narrow(1, 0, 10).fill_(-INFINITY);
  const Tensor y = softmax(masked, 1), ly = log_softmax(masked, 1);
  EXPECT_EQ(testing::max_abs_diff(y.narrow(1, 0, 10), Tensor::zeros({R, 10})), 0.0);
  const Tensor dx = log_softmax_backward(ly, Tensor::ones({R, V}), 1);
  EXPECT_TRUE(testing::all_close(dx.narrow(1, 0, 10), Tensor::ones({R, 10}), 0, 0));
}

TEST(VectorMath, SwigluAndItsBackwardWithinFourUlps) {
  constexpr int64_t N = 50000;
  const Tensor gate = mul(testing::rand_normal({N}, 2), 5.0), up = testing::rand_normal({N}, 3);
  const Tensor dout = testing::rand_normal({N}, 4);
  const std::vector<double> g = gate.to_vector<double>(), u = up.to_vector<double>(),
                            d = dout.to_vector<double>();
  std::vector<double> out(N), dg(N), du(N);
  for (int64_t i = 0; i < N; ++i) {
    const double s = 1 / (1 + std::exp(-g[i]));
    out[i] = g[i] * s * u[i];
    dg[i] = d[i] * u[i] * s * (1 + g[i] * (1 - s));
    du[i] = d[i] * g[i] * s;
  }
  EXPECT_LE(max_ulps(swiglu(gate, up), out), 4.0);
  const auto [dgate, dup] = swiglu_backward(gate, up, dout);
  EXPECT_LE(max_ulps(dup, du), 4.0);
  // dg's (1 + g (1 - s)) cancels near g = -1.28: there the error is relative to the terms.
  const std::vector<float> dgv = dgate.to_vector<float>();
  for (int64_t i = 0; i < N; ++i)
    EXPECT_NEAR(dgv[i], dg[i], 1e-6 * (std::abs(d[i] * u[i]) + 1e-30)) << i;
}

TEST(VectorMath, UnaryTranscendentalsWithinFourUlps) {
  constexpr int64_t N = 50000;  // several blocks, split across threads
  const Tensor x = mul(testing::rand_normal({N}, 5), 6.0), dy = testing::rand_normal({N}, 6);
  const std::vector<double> xv = x.to_vector<double>(), d = dy.to_vector<double>();
  const auto exact = [&](auto f) {
    std::vector<double> out(N);
    for (int64_t i = 0; i < N; ++i) out[i] = f(xv[i]);
    return out;
  };
  const auto sigmoid_of = [](double v) { return 1 / (1 + std::exp(-v)); };
  EXPECT_LE(max_ulps(exp(x), exact([](double v) { return std::exp(v); })), 4.0);
  // Eigen's rational tanh: 4.1 ulps with FMA (AVX-512), 5.1 without (SSE).
  EXPECT_LE(max_ulps(tanh(x), exact([](double v) { return std::tanh(v); })), 6.0);
  EXPECT_LE(max_ulps(sigmoid(x), exact(sigmoid_of)), 4.0);
  EXPECT_LE(max_ulps(silu(x), exact([&](double v) { return v * sigmoid_of(v); })), 4.0);
  const Tensor positive = add(abs(x), 1e-3);
  const std::vector<double> pv = positive.to_vector<double>();
  std::vector<double> logs(N);
  for (int64_t i = 0; i < N; ++i) logs[i] = std::log(pv[i]);
  EXPECT_LE(max_ulps(log(positive), logs), 4.0);
  // SiLU's backward: dy * s * (1 + x (1 - s)) cancels near x = -1.28, so, as for SwiGLU's, the
  // error there is relative to the terms.
  const std::vector<float> dx = unary_backward(UnaryOp::silu, x, silu(x), dy).to_vector<float>();
  for (int64_t i = 0; i < N; ++i) {
    const double s = sigmoid_of(xv[i]);
    EXPECT_NEAR(dx[i], d[i] * s * (1 + xv[i] * (1 - s)),
                1e-6 * std::abs(d[i]) * (1 + std::abs(xv[i])))
        << i;
  }
}

TEST(VectorMath, RopeCosAndSinWithinTwoUlpsOfOne) {
  // x = (1, 0) per pair rotates to (cos, sin) of the fp32 angle float(pos) * inv_freq: positions
  // from 0 to 2^20 (past Eigen's fast argument reduction, about 1.2e5 with FMA and 2.6e4
  // without) over 64 frequencies, an odd count of distinct positions (a ragged table).
  constexpr int64_t T = 333, D = 128, half = D / 2;
  std::vector<int64_t> positions(T);
  for (int64_t t = 0; t < T; ++t) positions[t] = t < 200 ? t : (t * 3163) % (1 << 20);
  const Tensor pos = Tensor::from_vector<int64_t>(positions, {1, T});
  Tensor x = Tensor::zeros({1, T, 1, D});
  x.narrow(3, 0, half).fill_(1.0);
  const std::vector<float> inv_freq = rope_frequencies(D, 1e6).inv_freq;
  const std::vector<float> y = rope(x, pos, rope_frequencies(D, 1e6)).to_vector<float>();
  double worst = 0;
  for (int64_t t = 0; t < T; ++t)
    for (int64_t i = 0; i < half; ++i) {
      const double angle = static_cast<float>(positions[t]) * inv_freq[i];
      worst = std::max({worst, std::abs(y[t * D + i] - std::cos(angle)),
                        std::abs(y[t * D + half + i] - std::sin(angle))});
    }
  EXPECT_LE(worst, std::ldexp(1.0, -23));
}

}  // namespace
}  // namespace sprig
