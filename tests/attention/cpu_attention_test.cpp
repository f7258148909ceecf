// CPU attention: the tiled flash implementation against the f64 dense reference with
// FlashAttention's rule (error <= 2x the naive f32 implementation's error + atol) for out, lse,
// dq, dk, dv over every mask kind, lengths, head dims and GQA ratios; fully masked rows; a
// hand-computed case; the reference's gradients against finite differences; argument checks.
#include <gtest/gtest.h>

#include <cmath>

#include "attention/attention.h"
#include "tests/attention/mask_test_util.h"
#include "tests/test_util.h"

namespace sprig {
namespace {

using testing::max_abs_diff;
using testing::rand_normal;

struct Inputs {
  Tensor q, k, v, dout;
};

Inputs random_inputs(const BatchMask& mask, int64_t batch, int64_t hq, int64_t hkv, int64_t d,
                     uint64_t seed) {
  return {rand_normal({batch, mask.q_len(), hq, d}, seed),
          rand_normal({batch, mask.k_len(), hkv, d}, seed + 1),
          rand_normal({batch, mask.k_len(), hkv, d}, seed + 2),
          rand_normal({batch, mask.q_len(), hq, d}, seed + 3)};
}

struct Results {
  Tensor out, lse, dq, dk, dv;
};

Results flash(const Inputs& in, const BatchMask& mask, double scale) {
  const AttentionMask compiled(mask);
  const AttentionOutput f = attention_forward(in.q, in.k, in.v, compiled, scale);
  const AttentionGrads g =
      attention_backward(in.q, in.k, in.v, f.out, f.lse, in.dout, compiled, scale);
  return {f.out, f.lse, g.dq, g.dk, g.dv};
}

// The dense reference in the precision of `dtype` (f64: the reference; f32: naive).
Results reference(const Inputs& in, const BatchMask& mask, double scale, DType dtype) {
  const Tensor q = in.q.to(dtype), k = in.k.to(dtype), v = in.v.to(dtype);
  const AttentionOutput f = attention_reference_forward(q, k, v, mask, scale);
  const AttentionGrads g = attention_reference_backward(q, k, v, in.dout.to(dtype), mask, scale);
  return {f.out, f.lse, g.dq, g.dk, g.dv};
}

// FlashAttention's rule on every output: |flash - ref| <= 2 |naive - ref| + 1e-6 (max norms).
void expect_flash_rule(const BatchMask& mask, int64_t batch, int64_t hq, int64_t hkv, int64_t d,
                       uint64_t seed) {
  const Inputs in = random_inputs(mask, batch, hq, hkv, d, seed);
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  const Results f = flash(in, mask, scale), naive = reference(in, mask, scale, DType::f32),
                ref = reference(in, mask, scale, DType::f64);
  const std::pair<const char*, Tensor Results::*> fields[] = {{"out", &Results::out},
                                                              {"lse", &Results::lse},
                                                              {"dq", &Results::dq},
                                                              {"dk", &Results::dk},
                                                              {"dv", &Results::dv}};
  for (const auto& [name, field] : fields) {
    const double err = max_abs_diff(f.*field, ref.*field);
    const double naive_err = max_abs_diff(naive.*field, ref.*field);
    EXPECT_LE(err, 2 * naive_err + 1e-6)
        << name << ": flash error " << err << ", naive f32 error " << naive_err;
  }
}

std::string trace(testing::MaskKind kind, int64_t t, int64_t d, int64_t hq, int64_t hkv) {
  return std::string(testing::mask_kind_name(kind)) + " T " + std::to_string(t) + " D " +
         std::to_string(d) + " heads " + std::to_string(hq) + ":" + std::to_string(hkv);
}

TEST(CpuAttention, ShortLengthsEveryKindHeadDimAndGqaRatio) {
  std::mt19937 rng(1);
  uint64_t seed = 100;
  for (testing::MaskKind kind : testing::kAllMaskKinds)
    for (int64_t t : {1, 17, 97})
      for (int64_t d : {64, 128})
        for (auto [hq, hkv] : {std::pair<int64_t, int64_t>{2, 2}, {2, 1}, {8, 1}}) {
          SCOPED_TRACE(trace(kind, t, d, hq, hkv));
          // Batch of 2 with one mask per row.
          const BatchMask mask(
              {testing::random_mask(kind, t, rng), testing::random_mask(kind, t, rng)});
          expect_flash_rule(mask, 2, hq, hkv, d, seed += 10);
        }
}

TEST(CpuAttention, LongSequences) {
  std::mt19937 rng(2);
  const struct {
    testing::MaskKind kind;
    int64_t d, hq, hkv;
  } configs[] = {{testing::MaskKind::causal, 128, 2, 1},
                 {testing::MaskKind::dflash, 64, 8, 1},
                 {testing::MaskKind::prefix_trees, 64, 1, 1}};
  uint64_t seed = 500;
  for (const auto& c : configs) {
    SCOPED_TRACE(trace(c.kind, 1025, c.d, c.hq, c.hkv));
    const BatchMask mask(testing::random_mask(c.kind, 1025, rng));  // shared by the batch
    expect_flash_rule(mask, 1, c.hq, c.hkv, c.d, seed += 10);
  }
}

TEST(CpuAttention, FullyMaskedRowsGiveZeroOutputsAndGradients) {
  // Rows [100, 200) see nothing (whole 64-row tiles with empty lists among them), keys
  // [100, 200) are seen by no row.
  const BatchMask mask(block_diagonal({document_mask({60, 40}), Mask{100, 100, {}}}));
  const Inputs in = random_inputs(mask, 2, 4, 2, 64, 9);
  for (const Results& r : {flash(in, mask, 0.125), reference(in, mask, 0.125, DType::f64)}) {
    const std::vector<double> lse = r.lse.to_vector<double>();
    for (int64_t bh = 0; bh < 2 * 4; ++bh)
      for (int64_t t = 0; t < 200; ++t) {
        const double l = lse[bh * 200 + t];
        EXPECT_TRUE(t < 100 ? std::isfinite(l) : l == -INFINITY) << "row " << t;
      }
    for (const Tensor& x : {r.out, r.dq, r.dk, r.dv}) {
      const Tensor masked = x.slice(1, 100, 200);
      EXPECT_EQ(max_abs_diff(masked, Tensor::zeros(masked.shape(), masked.dtype())), 0.0);
      const Tensor seen = x.slice(1, 0, 100);
      EXPECT_GT(max_abs_diff(seen, Tensor::zeros(seen.shape(), seen.dtype())), 0.1);
    }
  }
}

TEST(CpuAttention, HandComputedCausalPair) {
  // q = [1, 2], k = [1, 1], v = [3, 5], dout = [1, 1], scale 1 (B = 1, H = 1, D = 1):
  // row 0 sees key 0: out 3, lse 1; row 1: p = [1/2, 1/2], out 4, lse 2 + ln 2.
  // Backward: row 1 dp = [3, 5], delta 4, ds = [-1/2, 1/2]: dq = [0, 0], dk = [-1, 1],
  // dv = [1 + 1/2, 1/2].
  const BatchMask mask(causal_mask(2));
  const Inputs in{Tensor::from_vector<float>({1, 2}, {1, 2, 1, 1}),
                  Tensor::from_vector<float>({1, 1}, {1, 2, 1, 1}),
                  Tensor::from_vector<float>({3, 5}, {1, 2, 1, 1}),
                  Tensor::from_vector<float>({1, 1}, {1, 2, 1, 1})};
  for (const Results& r : {flash(in, mask, 1.0), reference(in, mask, 1.0, DType::f64)}) {
    EXPECT_TRUE(testing::all_close(r.out, Tensor::from_vector<double>({3, 4}, {1, 2, 1, 1}), 1e-6));
    EXPECT_TRUE(testing::all_close(
        r.lse, Tensor::from_vector<double>({1, 2 + std::log(2.0)}, {1, 1, 2}), 1e-6));
    EXPECT_TRUE(testing::all_close(r.dq, Tensor::from_vector<double>({0, 0}, {1, 2, 1, 1}), 1e-6));
    EXPECT_TRUE(testing::all_close(r.dk, Tensor::from_vector<double>({-1, 1}, {1, 2, 1, 1}), 1e-6));
    EXPECT_TRUE(
        testing::all_close(r.dv, Tensor::from_vector<double>({1.5, 0.5}, {1, 2, 1, 1}), 1e-6));
  }
}

TEST(CpuAttention, ReferenceGradientsMatchFiniteDifferences) {
  // GQA 4:2, documents with a fully masked row, a DFlash-like rectangular mask.
  for (const Mask& m : {block_diagonal({document_mask({3, 2}), Mask{1, 1, {}}}),
                        dflash_mask({5, 2, {1, 3}, {true, false}, true, {}, 0})}) {
    const BatchMask mask(m);
    const Inputs in = random_inputs(mask, 1, 4, 2, 3, 21);
    const Tensor q = in.q.to(DType::f64), k = in.k.to(DType::f64), v = in.v.to(DType::f64);
    const Tensor dout = in.dout.to(DType::f64);
    const AttentionGrads g = attention_reference_backward(q, k, v, dout, mask, 0.7);
    auto out = [&](const Tensor& q_, const Tensor& k_, const Tensor& v_) {
      return attention_reference_forward(q_, k_, v_, mask, 0.7).out;
    };
    EXPECT_TRUE(testing::all_close(
        g.dq, testing::numeric_grad([&](const Tensor& x) { return out(x, k, v); }, q, dout), 1e-8));
    EXPECT_TRUE(testing::all_close(
        g.dk, testing::numeric_grad([&](const Tensor& x) { return out(q, x, v); }, k, dout), 1e-8));
    EXPECT_TRUE(testing::all_close(
        g.dv, testing::numeric_grad([&](const Tensor& x) { return out(q, k, x); }, v, dout), 1e-8));
  }
}

TEST(CpuAttention, DtypesAndStrides) {
  const BatchMask mask(document_mask({5, 7}));
  const AttentionMask compiled(mask);
  const Inputs in = random_inputs(mask, 2, 4, 2, 64, 33);
  const AttentionOutput f32 = attention_forward(in.q, in.k, in.v, compiled, 0.125);
  // Strided inputs give the same values.
  const AttentionOutput strided =
      attention_forward(testing::non_contiguous(in.q), testing::non_contiguous(in.k),
                        testing::non_contiguous(in.v), compiled, 0.125);
  EXPECT_EQ(max_abs_diff(strided.out, f32.out), 0.0);
  // f64 runs the dense f64 reference.
  const Tensor q = in.q.to(DType::f64), k = in.k.to(DType::f64), v = in.v.to(DType::f64);
  const AttentionOutput f64 = attention_forward(q, k, v, compiled, 0.125);
  EXPECT_EQ(f64.out.dtype(), DType::f64);
  EXPECT_EQ(max_abs_diff(f64.out, attention_reference_forward(q, k, v, mask, 0.125).out), 0.0);
  // bf16 computes in f32 and comes back in bf16.
  const AttentionOutput bf = attention_forward(in.q.to(DType::bf16), in.k.to(DType::bf16),
                                               in.v.to(DType::bf16), compiled, 0.125);
  EXPECT_EQ(bf.out.dtype(), DType::bf16);
  EXPECT_EQ(bf.lse.dtype(), DType::f32);
  EXPECT_TRUE(testing::all_close(bf.out, f32.out, 0.05));
}

TEST(CpuAttention, BadArguments) {
  const AttentionMask mask{BatchMask(causal_mask(4))};
  const Tensor q = Tensor::zeros({2, 4, 3, 8}), k = Tensor::zeros({2, 4, 2, 8});
  auto message = [](auto f) { return testing::invalid_argument_message(f); };
  EXPECT_EQ(message([&] { attention_forward(q, k, k, mask, 1.0); }),
            "[attention] query heads 3 must be a multiple of kv heads 2");
  EXPECT_EQ(message([&] {
              attention_forward(Tensor::zeros({2, 5, 2, 8}), k, k, mask, 1.0);
            }),
            "[attention] mask is [4, 4] but q and k have lengths 5 and 4");
  EXPECT_EQ(
      message([&] {
        attention_forward(k, Tensor::zeros({2, 4, 2, 4}), k, mask, 1.0);
      }),
      "[attention] k must have q's batch and head dim, got q [2, 4, 2, 8] and k [2, 4, 2, 4]");
  EXPECT_EQ(message([&] {
              attention_forward(k, k, Tensor::zeros({2, 4, 1, 8}), mask, 1.0);
            }),
            "[attention] v must have shape [2, 4, 2, 8], got [2, 4, 1, 8]");
  EXPECT_EQ(message([&] { attention_forward(k.select(0, 0), k, k, mask, 1.0); }),
            "[attention] q must have 4 dimensions, got 3 (shape [4, 2, 8])");
  const AttentionMask three_rows{BatchMask({causal_mask(4), causal_mask(4), causal_mask(4)})};
  EXPECT_EQ(message([&] { attention_forward(k, k, k, three_rows, 1.0); }),
            "[attention] mask has 3 rows for a batch of 2");
  EXPECT_EQ(message([&] {
              attention_backward(k, k, k, k, Tensor::zeros({2, 4, 2}), k, mask, 1.0);
            }),
            "[attention] lse must have shape [2, 2, 4], got [2, 4, 2]");
}

}  // namespace
}  // namespace sprig
