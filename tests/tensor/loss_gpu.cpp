// GPU parity tests of the row losses: cross-entropy and forward KL (the tables of
// tests/parity/loss_cases.h), Domino's corrected pair (also in place, with the gradients of its
// features and projection) in f32 and bf16 on awkward row counts and vocabulary sizes, huge and
// -inf logits, non-contiguous input, zero-probability terms.
#include <gtest/gtest.h>

#include <cmath>

#include "tensor/ops.h"
#include "tests/parity/loss_cases.h"
#include "tests/tensor/loss_test_util.h"
#include "tests/tensor/op_test_util.h"
#include "tests/test_util.h"

namespace sprig {
namespace {

using parity::some_targets;
using testing::non_contiguous;
using testing::quarter_steps;
using testing::rand_normal;
using testing::RowsVocab;
using testing::throws_invalid;
using testing::to_cuda;

// V = 1001 takes the scalar path; the others the 16-byte vector path.
const RowsVocab kCorrectedShapes[] = {{1, 1000}, {17, 32000}, {97, 1001}, {1025, 1000}};

SPRIG_GPU_PARITY_TEST(CrossEntropyGpu, MatchesCpuOnAwkwardShapes, parity::cross_entropy_cases())

// Features and projection in quarter steps (E = 4): both devices add the same exact corrections
// and agree on the argmax exactly.
TEST(CorrectedCrossEntropyGpu, MatchesCpuOnAwkwardShapesAndInPlace) {
  SPRIG_REQUIRE_CUDA();
  uint64_t seed = 100;
  constexpr int64_t E = 4;
  for (DType dt : {DType::f32, DType::bf16})
    for (const RowsVocab& s : kCorrectedShapes) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " R=" + std::to_string(s.rows) +
                   " V=" + std::to_string(s.vocab));
      const Tensor b = rand_normal({s.rows, s.vocab}, ++seed, dt);
      const Tensor e = quarter_steps({s.rows, E}, ++seed, dt);
      const Tensor p = quarter_steps({s.vocab, E}, ++seed, dt);
      const Tensor t = some_targets(s.rows, s.vocab, ++seed);
      const CrossEntropyResult cpu = corrected_cross_entropy(b, e, p, t, -100, true);
      const CrossEntropyResult gpu =
          corrected_cross_entropy(to_cuda(b), to_cuda(e), to_cuda(p), to_cuda(t), -100, true);
      EXPECT_PARITY(gpu.loss, cpu.loss);
      EXPECT_PARITY(gpu.lse, cpu.lse);
      EXPECT_EQ(gpu.argmax.to_vector<int64_t>(), cpu.argmax.to_vector<int64_t>());
      const Tensor dloss = rand_normal({2, s.rows}, ++seed);
      Tensor gb = Tensor::empty(b.shape(), dt), ge = Tensor::empty(e.shape(), dt);
      Tensor gp = Tensor::empty(p.shape(), dt);
      corrected_cross_entropy_backward_into(dloss, b, e, p, t, cpu.lse, gb, ge, gp);
      // On the GPU in place: the base gradients overwrite the logits.
      const Tensor cb = to_cuda(b), cge = to_cuda(ge), cgp = to_cuda(gp);
      corrected_cross_entropy_backward_into(to_cuda(dloss), cb, to_cuda(e), to_cuda(p), to_cuda(t),
                                            to_cuda(cpu.lse), cb, cge, cgp);
      EXPECT_PARITY(cb, gb, 1, 1.0 / static_cast<double>(s.vocab));
      // dfeatures sums V terms of size about 1 / V, dproj R such terms. In bf16 the GPU rounds dc
      // to bf16 before its GEMMs (the CPU keeps it in f32): each term carries a bf16 rounding, and
      // they add up like sqrt(terms).
      const auto V = static_cast<double>(s.vocab), R = static_cast<double>(s.rows);
      const bool bf16 = dt == DType::bf16;
      EXPECT_PARITY(cge, ge, s.vocab, bf16 ? 1.0 / std::sqrt(V) : 1.0 / V);
      EXPECT_PARITY(cgp, gp, s.rows, bf16 ? std::sqrt(R) / V : 1.0 / V);
    }
}

TEST(CrossEntropyGpu, HugeLogitsTiesAndNonContiguousInput) {
  SPRIG_REQUIRE_CUDA();
  // Row 0 has a huge logit, row 1 two tied maxima (the first one wins), row 2 is ignored.
  const Tensor logits = Tensor::from_vector<float>(
      {1e4f, 0, -1e4f, 0, 88, 89, 90, 90, 7, 90, 1, 2, 3, 4, 5, 6}, {4, 4});
  const Tensor t = Tensor::from_vector<int32_t>({1, 2, -100, 0}, {4});
  const CrossEntropyResult cpu = cross_entropy(logits, t, -100, true);
  const CrossEntropyResult gpu =
      cross_entropy(non_contiguous(to_cuda(logits)), to_cuda(t), -100, true);
  EXPECT_PARITY(gpu.loss, cpu.loss);
  EXPECT_EQ(gpu.argmax.to_vector<int64_t>(), (std::vector<int64_t>{0, 2, 1, 3}));
}

// An ignored row's gradient is exactly 0 even where its logits or lse are not finite (the kernel
// used to compute 0 * (exp(x - lse) - onehot), NaN there), as on the CPU.
TEST(CrossEntropyGpu, IgnoredRowsGetZeroGradientWhateverTheirLogits) {
  SPRIG_REQUIRE_CUDA();
  const Tensor logits = Tensor::from_vector<float>(
      {INFINITY, 0, 1, 2, -INFINITY, -INFINITY, -INFINITY, -INFINITY, 0, 1, 2, 3}, {3, 4});
  const Tensor t = Tensor::from_vector<int64_t>({-100, -100, 2}, {3});
  const CrossEntropyResult cpu = cross_entropy(logits, t);
  const Tensor dloss = Tensor::ones({3});
  const Tensor expect = cross_entropy_backward(dloss, logits, t, cpu.lse);
  const Tensor got = cross_entropy_backward(to_cuda(dloss), to_cuda(logits), to_cuda(t),
                                            cross_entropy(to_cuda(logits), to_cuda(t)).lse);
  const std::vector<float> g = got.to_vector<float>();
  for (int i = 0; i < 8; ++i) EXPECT_EQ(g[i], 0.0f) << i;
  EXPECT_PARITY(got, expect);
}

SPRIG_GPU_PARITY_TEST(KlDivGpu, MatchesCpuOnAwkwardShapes, parity::kl_div_cases(false))
SPRIG_GPU_PARITY_TEST(KlDivGpu, TeacherRowsAndArgmaxMatchCpu, parity::kl_div_cases(true))

TEST(KlDivGpu, ZeroProbabilityTermsAndSpecE14) {
  SPRIG_REQUIRE_CUDA();
  const Tensor teacher =
      Tensor::from_vector<float>({0, -INFINITY, 0, 0, std::log(2.0f), 0}, {2, 3});
  const Tensor student = Tensor::from_vector<float>({0, 5, 0, 0, 0, 0}, {2, 3});
  const std::vector<float> kl = kl_div(to_cuda(teacher), to_cuda(student)).kl.to_vector<float>();
  EXPECT_NEAR(kl[0], 4.3202387, 1e-5);  // ln((2 + e^5) / 2)
  EXPECT_NEAR(kl[1], 0.0588915, 1e-6);  // 0.5 ln(1.125)
}

TEST(LossGpu, RejectsBadInputs) {
  SPRIG_REQUIRE_CUDA();
  const Tensor logits = to_cuda(Tensor::zeros({2, 5}));
  EXPECT_TRUE(throws_invalid(
      [&] {
        cross_entropy(logits, to_cuda(Tensor::from_vector<int64_t>({0, 5}, {2})));
      },
      "[cross_entropy] target 5 out of range [0, 5) at row 1"));
  EXPECT_TRUE(throws_invalid(
      [&] {
        cross_entropy(logits, Tensor::from_vector<int64_t>({0, 1}, {2}));
      },
      "[cross_entropy] tensors are on different devices"));
  EXPECT_TRUE(throws_invalid(
      [&] {
        kl_div(logits, Tensor::zeros({2, 5}));
      },
      "[kl_div] tensors are on different devices"));
}

}  // namespace
}  // namespace sprig
