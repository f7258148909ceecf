// CPU tests of the row losses: cross-entropy (values against a naive f64 formula, ignored rows,
// numerical stability, argmax, bf16 input) and forward KL (docs/semantics.md E14 values,
// zero-probability terms), each backward against central differences in f64, and argument errors.
#include <gtest/gtest.h>
#include <omp.h>

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
using testing::rand_normal;
using testing::throws_invalid;

// log(sum(exp(row))) of each row of a [R, V] tensor, in f64 (no max shift: test values are small).
std::vector<double> naive_lse(const Tensor& x, double temperature = 1.0) {
  const std::vector<double> v = x.to_vector<double>();
  const int64_t R = x.size(0), V = x.size(1);
  std::vector<double> lse(R);
  for (int64_t r = 0; r < R; ++r) {
    double s = 0;
    for (int64_t c = 0; c < V; ++c) s += std::exp(v[r * V + c] / temperature);
    lse[r] = std::log(s);
  }
  return lse;
}

// The two plain cross-entropies corrected_cross_entropy must reproduce: of b and of b + delta.
struct CorrectedResultCheck {
  CrossEntropyResult of[2];
};

double max_abs(const Tensor& x) {
  double m = 0;
  for (double v : x.to_vector<double>()) m = std::max(m, std::abs(v));
  return m;
}

Tensor targets_of(const std::vector<int64_t>& t) {
  return Tensor::from_vector(t, {static_cast<int64_t>(t.size())});
}

// ---- cross-entropy ------------------------------------------------------------------------------

TEST(CrossEntropy, MatchesNaiveF64WithIgnoredRow) {
  for (DType dt : {DType::f64, DType::f32}) {
    const Tensor logits = rand_normal({4, 7}, 1, dt);
    const std::vector<int64_t> t = {3, -100, 0, 6};
    const CrossEntropyResult res = cross_entropy(logits, targets_of(t));
    const std::vector<double> x = logits.to_vector<double>(), lse = naive_lse(logits);
    std::vector<double> loss(4);
    for (int r = 0; r < 4; ++r) loss[r] = t[r] == -100 ? 0.0 : lse[r] - x[r * 7 + t[r]];
    const DType stat = dt == DType::f64 ? DType::f64 : DType::f32;
    const double tol = dt == DType::f64 ? 1e-12 : 1e-6;
    EXPECT_EQ(res.loss.dtype(), stat);
    EXPECT_TRUE(all_close(res.loss, Tensor::from_vector(loss, {4}, stat), tol));
    EXPECT_TRUE(all_close(res.lse, Tensor::from_vector(lse, {4}, stat), tol));
    EXPECT_FALSE(res.argmax.defined());
  }
}

TEST(CrossEntropy, HugeLogitsAreStable) {
  // Row 0: lse = 1e4, loss of target 1 = 1e4. Row 1: exp(90) overflows f32, but
  // lse = 90 + log(1 + e^-1 + e^-2) = 90.4076060, loss of target 2 = 0.4076060.
  const Tensor logits = Tensor::from_vector<float>({1e4f, 0, -1e4f, 88, 89, 90}, {2, 3});
  const CrossEntropyResult res = cross_entropy(logits, targets_of({1, 2}));
  EXPECT_TRUE(all_close(res.loss, Tensor::from_vector<float>({1e4f, 0.4076060f}, {2}), 1e-5));
  EXPECT_TRUE(all_close(res.lse, Tensor::from_vector<float>({1e4f, 90.407606f}, {2}), 1e-5));
}

TEST(CrossEntropy, ArgmaxPicksFirstMaximum) {
  const Tensor logits = Tensor::from_vector<float>({1, 3, 3, 2, 5, 5, 5, 5, 0, -1, -2, 7}, {3, 4});
  const CrossEntropyResult res = cross_entropy(logits, targets_of({0, 1, 2}), -100, true);
  EXPECT_EQ(res.argmax.dtype(), DType::i64);
  EXPECT_EQ(res.argmax.to_vector<int64_t>(), (std::vector<int64_t>{1, 0, 3}));
}

TEST(CrossEntropy, IgnoreIndexInsideTheVocabulary) {
  // ignore_index = 2 is also a class id: rows with target 2 are ignored, others are not.
  const Tensor logits = rand_normal({3, 4}, 2);
  const Tensor t = Tensor::from_vector<int32_t>({2, 1, 2}, {3});
  const CrossEntropyResult res = cross_entropy(logits, t, 2);
  const std::vector<float> loss = res.loss.to_vector<float>();
  EXPECT_EQ(loss[0], 0.0f);
  EXPECT_GT(loss[1], 0.0f);
  EXPECT_EQ(loss[2], 0.0f);
  const Tensor dlogits = cross_entropy_backward(Tensor::ones({3}), logits, t, res.lse, 2);
  const std::vector<float> g = dlogits.to_vector<float>();
  for (int v = 0; v < 4; ++v) {
    EXPECT_EQ(g[v], 0.0f);
    EXPECT_EQ(g[8 + v], 0.0f);
  }
  EXPECT_LT(g[4 + 1], 0.0f);  // softmax - 1 at the target
}

TEST(CrossEntropy, Bf16ComputesLikeF32OfTheSameValues) {
  const Tensor logits = rand_normal({3, 1000}, 3, DType::bf16);
  const Tensor t = targets_of({5, 999, -100});
  const CrossEntropyResult a = cross_entropy(logits, t, -100, true);
  const CrossEntropyResult b = cross_entropy(logits.to(DType::f32), t, -100, true);
  EXPECT_EQ(a.loss.dtype(), DType::f32);
  EXPECT_TRUE(all_close(a.loss, b.loss, 0.0));
  EXPECT_EQ(a.argmax.to_vector<int64_t>(), b.argmax.to_vector<int64_t>());
  const Tensor dloss = rand_normal({3}, 4);
  const Tensor ga = cross_entropy_backward(dloss, logits, t, a.lse);
  const Tensor gb = cross_entropy_backward(dloss, logits.to(DType::f32), t, b.lse);
  EXPECT_EQ(ga.dtype(), DType::bf16);
  EXPECT_TRUE(all_close(ga, gb.to(DType::bf16), 0.0));
}

// The gradient written over the logits themselves equals the one written apart, bit for bit (the
// output head's backward computes it so); another `out` is written, and a wrong one refused.
TEST(CrossEntropy, BackwardInPlaceOverTheLogits) {
  for (DType dt : {DType::f32, DType::bf16, DType::f64}) {
    const Tensor logits = rand_normal({5, 300}, 21, dt), dloss = rand_normal({5}, 22);
    const Tensor t = targets_of({4, 0, -100, 299, 7});
    const Tensor lse = cross_entropy(logits, t).lse;
    const Tensor apart = cross_entropy_backward(dloss, logits, t, lse);
    Tensor scratch = logits.clone();
    const Tensor over = cross_entropy_backward(dloss, scratch, t, lse, -100, scratch);
    EXPECT_EQ(over.data_ptr(), scratch.data_ptr());
    EXPECT_TRUE(all_close(over, apart, 0.0)) << dtype_name(dt);
    const Tensor out = Tensor::empty(logits.shape(), dt);
    cross_entropy_backward(dloss, logits, t, lse, -100, out);
    EXPECT_TRUE(all_close(out, apart, 0.0)) << dtype_name(dt);
  }
  const Tensor logits = Tensor::zeros({3, 7});
  const Tensor lse = cross_entropy(logits, targets_of({0, 1, 2})).lse;
  EXPECT_TRUE(throws_invalid(
      [&] {
        cross_entropy_backward(Tensor::ones({3}), logits, targets_of({0, 1, 2}), lse, -100,
                               Tensor::zeros({3, 6}));
      },
      "[cross_entropy_backward] out must be a contiguous [3, 7] f32 tensor on cpu, got [3, 6] "
      "f32"));
}

TEST(CrossEntropy, BackwardMatchesFiniteDifferences) {
  const Tensor logits = rand_normal({4, 5}, 5, DType::f64), dloss = rand_normal({4}, 6, DType::f64);
  const Tensor t = targets_of({4, 0, -100, 2});
  const auto loss = [&] { return dot(cross_entropy(logits, t).loss, dloss); };
  const Tensor dlogits = cross_entropy_backward(dloss, logits, t, cross_entropy(logits, t).lse);
  EXPECT_TRUE(all_close(dlogits, numeric_gradient(loss, logits), 1e-8));
}

// Domino's pair equals two plain cross-entropies: of b, and of c = b + e @ P^T rounded to the
// dtype. One tile (5 x 37) reproduces them exactly; several tiles (130 rows, 2100 columns: three
// row blocks and three column groups, both with ragged tails) merge the groups' log-sum-exps, so
// the values agree to rounding and the argmax exactly.
TEST(CorrectedCrossEntropy, EqualsTwoCrossEntropiesForwardAndBackward) {
  struct Case {
    int64_t rows, vocab, width;
    std::vector<int64_t> targets;
  };
  std::vector<int64_t> many(130);
  for (int64_t r = 0; r < 130; ++r) many[r] = r % 7 == 3 ? -100 : (r * 331) % 2100;
  const std::vector<Case> cases = {{5, 37, 3, {3, -100, 0, 36, 7}}, {130, 2100, 5, many}};
  for (const Case& k : cases)
    for (DType dt : {DType::f64, DType::f32, DType::bf16}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " V=" + std::to_string(k.vocab));
      const bool one_tile = k.vocab <= 1024;
      const Tensor b = rand_normal({k.rows, k.vocab}, 11, dt);
      const Tensor e = rand_normal({k.rows, k.width}, 12, dt);
      const Tensor p = rand_normal({k.vocab, k.width}, 14, dt);
      const Tensor c = add(b, matmul(e, p, false, true));  // rounded to dt, as in place
      const Tensor t = targets_of(k.targets);
      const CorrectedResultCheck expect{cross_entropy(b, t, -100, true),
                                        cross_entropy(c, t, -100, true)};
      const CrossEntropyResult got = corrected_cross_entropy(b, e, p, t, -100, true);
      ASSERT_EQ(got.loss.shape(), (Shape{2, k.rows}));
      const double merged = one_tile ? 0.0 : dt == DType::f64 ? 1e-13 : 1e-6;
      for (int i = 0; i < 2; ++i) {
        EXPECT_TRUE(all_close(got.loss.select(0, i), expect.of[i].loss, merged, merged));
        EXPECT_TRUE(all_close(got.lse.select(0, i), expect.of[i].lse, merged, merged));
        EXPECT_EQ(got.argmax.select(0, i).to_vector<int64_t>(),
                  expect.of[i].argmax.to_vector<int64_t>());
      }
      // Backward: dc = g1 (softmax(c) - onehot), db = g0 (softmax(b) - onehot) + dc,
      // de = dc @ P, dP = dc^T @ e.
      const Tensor dloss = rand_normal({2, k.rows}, 13, DType::f32).to(got.lse.dtype());
      const Tensor dc =
          cross_entropy_backward(dloss.select(0, 1), c, t, expect.of[1].lse).to(DType::f64);
      const Tensor db = add(
          cross_entropy_backward(dloss.select(0, 0), b, t, expect.of[0].lse).to(DType::f64), dc);
      const Tensor de = matmul(dc, p.to(DType::f64)), dp = matmul(dc, e.to(DType::f64), true);
      Tensor gb = Tensor::empty(b.shape(), dt), ge = Tensor::empty(e.shape(), dt);
      Tensor gp = Tensor::empty(p.shape(), dt);
      corrected_cross_entropy_backward_into(dloss, b, e, p, t, got.lse, gb, ge, gp);
      const double tol = dt == DType::bf16 ? 1.0 / 64 : dt == DType::f32 ? 1e-6 : 1e-13;
      EXPECT_TRUE(all_close(gb.to(DType::f64), db, tol, tol));
      EXPECT_TRUE(all_close(ge.to(DType::f64), de, tol * std::sqrt(k.vocab), tol));
      EXPECT_TRUE(all_close(gp.to(DType::f64), dp, tol * std::sqrt(k.rows), tol));
      // In place: dbase replaces the base logits, with the same values; accumulate_dproj adds
      // (block by block: exactly 2 gp with one block of rows).
      const Tensor b2 = b.clone(), gp2 = gp.clone();
      corrected_cross_entropy_backward_into(dloss, b2, e, p, t, got.lse, b2, ge, gp2, true);
      EXPECT_TRUE(all_close(b2, gb, 0.0));
      const double blocks = k.rows <= 64 ? 0.0 : tol;
      EXPECT_TRUE(all_close(gp2.to(DType::f64), mul(gp, 2.0).to(DType::f64), blocks, blocks));
      // An ignored row's base gradient is exactly 0.
      const int64_t ignored = k.targets[1] == -100 ? 1 : 3;
      EXPECT_EQ(max_abs(gb.select(0, ignored)), 0.0);
    }
}

// The tiling follows the shapes, never the thread count: one thread and all of them give the
// same bits.
TEST(CorrectedCrossEntropy, BitwiseTheSameOnOneThread) {
  const Tensor b = rand_normal({200, 3000}, 31), e = rand_normal({200, 8}, 32);
  const Tensor p = rand_normal({3000, 8}, 33), dloss = rand_normal({2, 200}, 34);
  std::vector<int64_t> t(200);
  for (int64_t r = 0; r < 200; ++r) t[r] = (r * 97) % 3000;
  const auto run = [&] {
    const CrossEntropyResult res = corrected_cross_entropy(b, e, p, targets_of(t), -100, true);
    std::vector<Tensor> out = {res.loss, res.lse, Tensor::empty(b.shape()),
                               Tensor::empty(e.shape()), Tensor::empty(p.shape())};
    corrected_cross_entropy_backward_into(dloss, b, e, p, targets_of(t), res.lse, out[2], out[3],
                                          out[4]);
    return out;
  };
  const std::vector<Tensor> all = run();
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  const std::vector<Tensor> one = run();
  omp_set_num_threads(threads);
  for (size_t i = 0; i < all.size(); ++i) EXPECT_TRUE(all_close(one[i], all[i], 0.0)) << i;
}

TEST(CorrectedCrossEntropy, BackwardMatchesFiniteDifferences) {
  const Tensor b = rand_normal({4, 6}, 21, DType::f64), e = rand_normal({4, 2}, 22, DType::f64);
  const Tensor p = rand_normal({6, 2}, 24, DType::f64);
  const Tensor dloss = rand_normal({2, 4}, 23, DType::f64);
  const Tensor t = targets_of({5, 0, -100, 2});
  const auto loss = [&] { return dot(corrected_cross_entropy(b, e, p, t).loss, dloss); };
  Tensor gb = Tensor::empty(b.shape(), DType::f64), ge = Tensor::empty(e.shape(), DType::f64);
  Tensor gp = Tensor::empty(p.shape(), DType::f64);
  corrected_cross_entropy_backward_into(dloss, b, e, p, t, corrected_cross_entropy(b, e, p, t).lse,
                                        gb, ge, gp);
  EXPECT_TRUE(all_close(gb, numeric_gradient(loss, b), 1e-8));
  EXPECT_TRUE(all_close(ge, numeric_gradient(loss, e), 1e-8));
  EXPECT_TRUE(all_close(gp, numeric_gradient(loss, p), 1e-8));
  // A frozen projection: no dproj, the same other gradients.
  Tensor gb2 = Tensor::empty(b.shape(), DType::f64), ge2 = Tensor::empty(e.shape(), DType::f64);
  corrected_cross_entropy_backward_into(dloss, b, e, p, t, corrected_cross_entropy(b, e, p, t).lse,
                                        gb2, ge2, Tensor());
  EXPECT_TRUE(all_close(gb2, gb, 0.0));
  EXPECT_TRUE(all_close(ge2, ge, 0.0));
}

// No rows: dproj is written as zeros (or left alone when accumulating).
TEST(CorrectedCrossEntropy, NoRows) {
  const Tensor b = Tensor::zeros({0, 5}), e = Tensor::zeros({0, 2}), p = rand_normal({5, 2}, 41);
  const Tensor t = targets_of({});
  const CrossEntropyResult res = corrected_cross_entropy(b, e, p, t);
  EXPECT_EQ(res.loss.shape(), (Shape{2, 0}));
  Tensor gp = Tensor::full({5, 2}, 3.0), ge = Tensor::empty({0, 2});
  corrected_cross_entropy_backward_into(Tensor::zeros({2, 0}), b, e, p, t, res.lse, b, ge, gp,
                                        true);
  EXPECT_EQ(max_abs(sub(gp, Tensor::full({5, 2}, 3.0))), 0.0);
  corrected_cross_entropy_backward_into(Tensor::zeros({2, 0}), b, e, p, t, res.lse, b, ge, gp);
  EXPECT_EQ(max_abs(gp), 0.0);
}

TEST(CorrectedCrossEntropy, RejectsBadInputs) {
  const Tensor b = Tensor::zeros({3, 7}), e = Tensor::zeros({3, 2}), p = Tensor::zeros({7, 2});
  const Tensor t = targets_of({0, 1, 2});
  EXPECT_TRUE(throws_invalid(
      [&] {
        corrected_cross_entropy(b, e, Tensor::zeros({6, 2}), t);
      },
      "[corrected_cross_entropy] base [3, 7], features [3, 2] and proj [6, 2] must be [R, V], "
      "[R, E] and [V, E]"));
  EXPECT_TRUE(throws_invalid(
      [&] {
        corrected_cross_entropy(b, e, p, targets_of({0, 1, 9}));
      },
      "[corrected_cross_entropy] target 9 out of range [0, 7) at row 2"));
  EXPECT_TRUE(throws_invalid(
      [&] {
        corrected_cross_entropy(b, Tensor::zeros({2, 3}).transpose(0, 1), p, t);
      },
      "[corrected_cross_entropy] base, features and proj must be contiguous"));
  EXPECT_TRUE(throws_invalid([&] { corrected_cross_entropy(b, e.to(DType::bf16), p, t); },
                             "[corrected_cross_entropy] dtype mismatch: f32 and bf16"));
  const Tensor lse = corrected_cross_entropy(b, e, p, t).lse;
  Tensor g = Tensor::empty({3, 7}), ge = Tensor::empty({3, 2});
  EXPECT_TRUE(throws_invalid(
      [&] { corrected_cross_entropy_backward_into(Tensor::ones({3}), b, e, p, t, lse, g, ge, p); },
      "[corrected_cross_entropy_backward] dloss must have shape [2, 3], got [3]"));
  EXPECT_TRUE(throws_invalid(
      [&] {
        corrected_cross_entropy_backward_into(Tensor::ones({2, 3}), b, e, p, t, lse,
                                              Tensor::empty({3, 7}, DType::bf16), ge, Tensor());
      },
      "[corrected_cross_entropy_backward] dtype mismatch: f32 and bf16"));
  EXPECT_TRUE(throws_invalid(
      [&] {
        corrected_cross_entropy_backward_into(Tensor::ones({2, 3}), b, e, p, t, lse, g, ge,
                                              Tensor::empty({2, 7}));
      },
      "[corrected_cross_entropy_backward] dproj must have shape [7, 2], got [2, 7]"));
}

TEST(CrossEntropy, RejectsBadInputs) {
  const Tensor logits = Tensor::zeros({3, 7});
  EXPECT_TRUE(throws_invalid(
      [&] {
        cross_entropy(logits, targets_of({0, 1, 7}));
      },
      "[cross_entropy] target 7 out of range [0, 7) at row 2"));
  EXPECT_TRUE(throws_invalid(
      [&] {
        cross_entropy(logits, targets_of({-1, 1, 2}));
      },
      "[cross_entropy] target -1 out of range [0, 7) at row 0"));
  EXPECT_TRUE(throws_invalid(
      [&] {
        cross_entropy(logits, targets_of({0, 1}));
      },
      "[cross_entropy] targets must have shape [3], got [2]"));
  EXPECT_TRUE(throws_invalid([&] { cross_entropy(logits, Tensor::zeros({3})); },
                             "[cross_entropy] targets must be i32 or i64, got f32"));
  EXPECT_TRUE(throws_invalid([&] { cross_entropy(Tensor::zeros({7}), targets_of({0})); },
                             "[cross_entropy] logits must have 2 dimensions, got 1"));
  const Tensor lse = cross_entropy(logits, targets_of({0, 1, 2})).lse;
  EXPECT_TRUE(throws_invalid(
      [&] {
        cross_entropy_backward(Tensor::ones({2}), logits, targets_of({0, 1, 2}), lse);
      },
      "[cross_entropy_backward] dloss must have shape [3], got [2]"));
  EXPECT_TRUE(throws_invalid(
      [&] {
        cross_entropy_backward(Tensor::ones({3}), logits, targets_of({0, 1, 2}),
                               lse.to(DType::f64));
      },
      "[cross_entropy_backward] lse must be f32, got f64"));
}

// ---- KL divergence ------------------------------------------------------------------------------

TEST(KlDiv, SpecE14Values) {
  // teacher [0, ln 2, 0] -> p = [1/4, 1/2, 1/4]; student uniform: KL = 0.5 ln(1.125) = 0.0588915.
  const Tensor teacher = Tensor::from_vector<float>({0, std::log(2.0f), 0}, {1, 3});
  const Tensor student = Tensor::zeros({1, 3});
  const KLResult t1 = kl_div(teacher, student, 1.0);
  EXPECT_NEAR(t1.kl.item(), 0.0588915, 1e-6);
  EXPECT_NEAR(t1.teacher_lse.item(), std::log(4.0), 1e-6);
  EXPECT_NEAR(t1.student_lse.item(), std::log(3.0), 1e-6);
  // T = 2: the raw KL is 0.0568824 / T^2 (the T^2 factor belongs to the JetSpec loss).
  EXPECT_NEAR(kl_div(teacher, student, 2.0).kl.item(), 0.0568824 / 4, 1e-6);
}

TEST(KlDiv, MatchesNaiveF64) {
  const Tensor teacher = rand_normal({4, 9}, 10, DType::f64);
  const Tensor student = rand_normal({4, 9}, 11, DType::f64);
  const double temp = 1.5;
  const std::vector<double> t = teacher.to_vector<double>(), s = student.to_vector<double>();
  const std::vector<double> tl = naive_lse(teacher, temp), sl = naive_lse(student, temp);
  std::vector<double> kl(4, 0.0);
  for (int r = 0; r < 4; ++r)
    for (int v = 0; v < 9; ++v) {
      const double log_p = t[r * 9 + v] / temp - tl[r], log_q = s[r * 9 + v] / temp - sl[r];
      kl[r] += std::exp(log_p) * (log_p - log_q);
    }
  const KLResult res = kl_div(teacher, student, temp);
  EXPECT_TRUE(all_close(res.kl, Tensor::from_vector(kl, {4}), 1e-12));
  EXPECT_TRUE(all_close(res.teacher_lse, Tensor::from_vector(tl, {4}), 1e-12));
  EXPECT_TRUE(all_close(res.student_lse, Tensor::from_vector(sl, {4}), 1e-12));
}

TEST(KlDiv, ZeroProbabilityTermsContributeZero) {
  // p = [1/2, 0, 1/2]; q = [1, e^5, 1] / (2 + e^5): KL = ln((2 + e^5) / 2) = 4.3202387.
  const Tensor teacher = Tensor::from_vector<float>({0, -INFINITY, 0}, {1, 3});
  const Tensor student = Tensor::from_vector<float>({0, 5, 0}, {1, 3});
  EXPECT_NEAR(kl_div(teacher, student).kl.item(), 4.3202387, 1e-5);
}

TEST(KlDiv, IdenticalDistributionsGiveZeroLossAndGradient) {
  const Tensor x = rand_normal({3, 6}, 12);
  const KLResult res = kl_div(x, x, 0.7);
  EXPECT_TRUE(all_close(res.kl, Tensor::zeros({3}), 1e-6));
  EXPECT_TRUE(
      all_close(kl_div_backward(Tensor::ones({3}), x, x, res, 0.7), Tensor::zeros({3, 6}), 1e-6));
}

TEST(KlDiv, BackwardMatchesFiniteDifferences) {
  const Tensor teacher = rand_normal({3, 5}, 13, DType::f64);
  const Tensor student = rand_normal({3, 5}, 14, DType::f64);
  const Tensor dkl = rand_normal({3}, 15, DType::f64);
  const auto loss = [&] { return dot(kl_div(teacher, student, 2.0).kl, dkl); };
  const Tensor dstudent =
      kl_div_backward(dkl, teacher, student, kl_div(teacher, student, 2.0), 2.0);
  EXPECT_TRUE(all_close(dstudent, numeric_gradient(loss, student), 1e-8));
}

TEST(KlDiv, Bf16ComputesLikeF32OfTheSameValues) {
  const Tensor teacher = rand_normal({2, 300}, 16, DType::bf16);
  const Tensor student = rand_normal({2, 300}, 17, DType::bf16);
  const KLResult a = kl_div(teacher, student, 2.0);
  const KLResult b = kl_div(teacher.to(DType::f32), student.to(DType::f32), 2.0);
  EXPECT_TRUE(all_close(a.kl, b.kl, 0.0));
  const Tensor dkl = Tensor::ones({2});
  EXPECT_TRUE(all_close(
      kl_div_backward(dkl, teacher, student, a, 2.0),
      kl_div_backward(dkl, teacher.to(DType::f32), student.to(DType::f32), b, 2.0).to(DType::bf16),
      0.0));
}

// Teachers named by row (read in place) equal the gathered teachers, forward and backward; the
// student argmax is each row's first maximum.
TEST(KlDiv, TeacherRowsEqualGatheredTeachersAndArgmaxIsTheFirstMaximum) {
  for (DType dt : {DType::f64, DType::f32, DType::bf16}) {
    SCOPED_TRACE(dtype_name(dt));
    const Tensor teachers = rand_normal({4, 300}, 18, dt);
    Tensor student = rand_normal({6, 300}, 19, dt);
    student.narrow(0, 5, 1).fill_(1.0);  // all tied: the first index wins
    const Tensor rows = Tensor::from_vector<int64_t>({3, 0, 3, 1, 2, 0}, {6});
    const Tensor gathered = index_select(teachers, 0, rows);
    const KLResult a = kl_div(teachers, student, 2.0, rows, true);
    const KLResult b = kl_div(gathered, student, 2.0);
    EXPECT_TRUE(all_close(a.kl, b.kl, 0.0));
    EXPECT_TRUE(all_close(a.teacher_lse, b.teacher_lse, 0.0));
    EXPECT_TRUE(all_close(a.student_lse, b.student_lse, 0.0));
    const std::vector<int64_t> first = a.student_argmax.to_vector<int64_t>();
    EXPECT_EQ(first, argmax(student, 1).to_vector<int64_t>());
    EXPECT_EQ(first[5], 0);
    const Tensor dkl = rand_normal({6}, 20, DType::f32).to(a.kl.dtype());
    EXPECT_TRUE(all_close(kl_div_backward(dkl, teachers, student, a, 2.0, rows),
                          kl_div_backward(dkl, gathered, student, b, 2.0), 0.0));
  }
}

TEST(KlDiv, RejectsBadInputs) {
  const Tensor x = Tensor::zeros({2, 3});
  EXPECT_TRUE(throws_invalid(
      [&] {
        kl_div(x, Tensor::zeros({2, 4}));
      },
      "[kl_div] student must have shape [2, 3], got [2, 4]"));
  EXPECT_TRUE(throws_invalid(
      [&] {
        kl_div(x, Tensor::zeros({2, 3}, DType::bf16));
      },
      "[kl_div] dtype mismatch: f32 and bf16"));
  EXPECT_TRUE(
      throws_invalid([&] { kl_div(x, x, 0.0); }, "[kl_div] temperature must be positive, got 0"));
  EXPECT_TRUE(throws_invalid([&] { kl_div_backward(Tensor::ones({3}), x, x, kl_div(x, x)); },
                             "[kl_div_backward] dkl must have shape [2], got [3]"));
  const Tensor student = Tensor::zeros({3, 3});
  EXPECT_TRUE(throws_invalid(
      [&] {
        kl_div(x, student, 1.0, Tensor::from_vector<int64_t>({0, 2, 1}, {3}));
      },
      "[kl_div] teacher row 2 out of range [0, 2) at row 1"));
  EXPECT_TRUE(throws_invalid(
      [&] {
        kl_div(x, student, 1.0, Tensor::from_vector<int64_t>({0, 1}, {2}));
      },
      "[kl_div] teacher_rows must have shape [3], got [2]"));
  EXPECT_TRUE(throws_invalid(
      [&] {
        kl_div(x, Tensor::zeros({3, 4}), 1.0, Tensor::zeros({3}, DType::i64));
      },
      "[kl_div] student [3, 4] and teacher [2, 3] must have the same vocabulary"));
}

}  // namespace
}  // namespace sprig
