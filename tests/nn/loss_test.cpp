// linear_cross_entropy and linear_kl_div (chunked LM-head losses) against a naive f64
// computation and the plain logits + loss path, values and gradients, with chunks smaller than
// the batch.
#include "nn/loss.h"

#include <gtest/gtest.h>

#include <cmath>

#include "autograd/functions.h"
#include "autograd/gradcheck.h"
#include "tests/test_util.h"

namespace sprig {
namespace {

constexpr int64_t N = 10, H = 6, V = 7;

Tensor targets_with_ignored() {
  return Tensor::from_vector<int64_t>({3, -100, 0, 6, 6, 2, -100, 1, 5, 4}, {N});
}

// loss[n] = logsumexp(h[n] . w) - h[n] . w[target], 0 for ignored rows, in f64 by hand.
std::vector<double> naive_losses(const Tensor& hidden, const Tensor& weight,
                                 const Tensor& targets) {
  const std::vector<double> h = hidden.to_vector<double>(), w = weight.to_vector<double>();
  const std::vector<int64_t> t = targets.to_vector<int64_t>();
  std::vector<double> out(N, 0.0);
  for (int64_t n = 0; n < N; ++n) {
    if (t[n] == -100) continue;
    std::vector<double> z(V, 0.0);
    for (int64_t v = 0; v < V; ++v)
      for (int64_t k = 0; k < H; ++k) z[v] += h[n * H + k] * w[v * H + k];
    double m = z[0], s = 0;
    for (double x : z) m = std::max(m, x);
    for (double x : z) s += std::exp(x - m);
    out[n] = m + std::log(s) - z[t[n]];
  }
  return out;
}

TEST(LinearCrossEntropy, MatchesPlainPathInSeveralChunks) {
  const Tensor h0 = testing::rand_normal({N, H}, 1), w0 = testing::rand_normal({V, H}, 2);
  const Tensor targets = targets_with_ignored();
  const Tensor seed = testing::rand_normal({N}, 3);  // distinct weight per row's loss

  for (int64_t chunk : {int64_t{1}, int64_t{3}, int64_t{4}, N, int64_t{64}}) {
    Var h(h0.clone(), true), w(w0.clone(), true);
    const Var loss = linear_cross_entropy(h, w, targets, -100, chunk);
    ASSERT_EQ(loss.shape(), (Shape{N}));
    const std::vector<double> expected = naive_losses(h0, w0, targets);
    EXPECT_TRUE(testing::all_close(loss.value(), Tensor::from_vector(expected, {N}), 1e-5, 1e-5))
        << "chunk " << chunk;
    loss.backward(seed);

    Var hp(h0.clone(), true), wp(w0.clone(), true);
    cross_entropy(matmul(hp, wp, false, true), targets).backward(seed);
    EXPECT_TRUE(testing::all_close(h.grad(), hp.grad(), 1e-6, 1e-5)) << "chunk " << chunk;
    EXPECT_TRUE(testing::all_close(w.grad(), wp.grad(), 1e-6, 1e-5)) << "chunk " << chunk;
    // Ignored rows get exactly no gradient.
    EXPECT_EQ(testing::max_abs_diff(h.grad().select(0, 1), Tensor::zeros({H})), 0.0);
  }
}

TEST(LinearCrossEntropy, GradcheckF64WithChunks) {
  const Tensor targets = targets_with_ignored();
  for (int64_t chunk : {int64_t{2}, int64_t{3}}) {
    const GradcheckResult r = gradcheck(
        [&](const std::vector<Var>& in) {
          return linear_cross_entropy(in[0], in[1], targets, -100, chunk);
        },
        {testing::rand_normal({N, H}, 4, DType::f64), testing::rand_normal({V, H}, 5, DType::f64)});
    EXPECT_TRUE(r.ok) << "chunk " << chunk << ": " << r.message;
  }
  // A custom ignore index.
  const Tensor custom = Tensor::from_vector<int64_t>({1, 3, 3, 0}, {4});
  const GradcheckResult r = gradcheck(
      [&](const std::vector<Var>& in) { return linear_cross_entropy(in[0], in[1], custom, 3, 3); },
      {testing::rand_normal({4, H}, 6, DType::f64), testing::rand_normal({V, H}, 7, DType::f64)});
  EXPECT_TRUE(r.ok) << r.message;
}

TEST(LinearCrossEntropy, RejectsBadShapes) {
  const Var h(Tensor::zeros({4, H})), w(Tensor::zeros({V, H}));
  EXPECT_EQ(testing::invalid_argument_message([&] {
              linear_cross_entropy(h, Var(Tensor::zeros({V, 5})), Tensor::zeros({4}, DType::i64));
            }),
            "[linear_cross_entropy] hidden [4, 6] and weight [7, 5] must be (N, H) and (V, H)");
  EXPECT_EQ(testing::invalid_argument_message(
                [&] { linear_cross_entropy(h, w, Tensor::zeros({3}, DType::i64)); }),
            "[linear_cross_entropy] targets must be (4), got [3]");
}

// The targets are checked once for all chunks (chunks of 2 rows here): the bad row is named by its
// place in the whole batch, not in its chunk.
TEST(LinearCrossEntropy, BadTargetsAreNamedByTheirRowInTheBatch) {
  const Var h(Tensor::zeros({4, H})), w(Tensor::zeros({V, H}));
  EXPECT_EQ(testing::invalid_argument_message([&] {
              linear_cross_entropy(h, w, Tensor::from_vector<int64_t>({0, 1, 2, 9}, {4}), -100, 2);
            }),
            "[linear_cross_entropy] target 9 out of range [0, 7) at row 3");
  EXPECT_EQ(testing::invalid_argument_message([&] {
              linear_kl_div(h, w, Tensor::zeros({3, V}), 1.0, 2,
                            Tensor::from_vector<int64_t>({0, 1, 2, 3}, {4}));
            }),
            "[linear_kl_div] teacher row 3 out of range [0, 3) at row 3");
}

// KL(softmax(t / T) || softmax(h . w / T)) per row, in f64 by hand.
std::vector<double> naive_kl(const Tensor& hidden, const Tensor& weight, const Tensor& teacher,
                             double temperature) {
  const std::vector<double> h = hidden.to_vector<double>(), w = weight.to_vector<double>();
  const std::vector<double> t = teacher.to_vector<double>();
  std::vector<double> out(N, 0.0);
  for (int64_t n = 0; n < N; ++n) {
    std::vector<double> zs(V, 0.0), zt(V, 0.0);
    for (int64_t v = 0; v < V; ++v) {
      for (int64_t k = 0; k < H; ++k) zs[v] += h[n * H + k] * w[v * H + k] / temperature;
      zt[v] = t[n * V + v] / temperature;
    }
    double ls = 0, lt = 0;
    for (int64_t v = 0; v < V; ++v) {
      ls += std::exp(zs[v]);
      lt += std::exp(zt[v]);
    }
    for (int64_t v = 0; v < V; ++v) {
      const double p = std::exp(zt[v]) / lt;
      out[n] += p * ((zt[v] - std::log(lt)) - (zs[v] - std::log(ls)));
    }
  }
  return out;
}

TEST(LinearKlDiv, MatchesPlainPathInSeveralChunks) {
  const Tensor h0 = testing::rand_normal({N, H}, 11), w0 = testing::rand_normal({V, H}, 12);
  const Tensor teacher = testing::rand_normal({N, V}, 13);
  const Tensor seed = testing::rand_normal({N}, 14);
  for (double temperature : {1.0, 2.0})
    for (int64_t chunk : {int64_t{1}, int64_t{3}, N}) {
      Var h(h0.clone(), true), w(w0.clone(), true);
      const Var kl = linear_kl_div(h, w, teacher, temperature, chunk);
      EXPECT_TRUE(testing::all_close(
          kl.value(), Tensor::from_vector(naive_kl(h0, w0, teacher, temperature), {N}), 1e-5, 1e-5))
          << "chunk " << chunk << ", T " << temperature;
      kl.backward(seed);
      Var hp(h0.clone(), true), wp(w0.clone(), true);
      kl_div(matmul(hp, wp, false, true), teacher, temperature).backward(seed);
      EXPECT_TRUE(testing::all_close(h.grad(), hp.grad(), 1e-6, 1e-5)) << "chunk " << chunk;
      EXPECT_TRUE(testing::all_close(w.grad(), wp.grad(), 1e-6, 1e-5)) << "chunk " << chunk;
    }
}

TEST(LinearKlDiv, GradcheckF64WithChunks) {
  const Tensor teacher = testing::rand_normal({N, V}, 15, DType::f64);
  const GradcheckResult r = gradcheck(
      [&](const std::vector<Var>& in) { return linear_kl_div(in[0], in[1], teacher, 1.5, 4); },
      {testing::rand_normal({N, H}, 16, DType::f64), testing::rand_normal({V, H}, 17, DType::f64)});
  EXPECT_TRUE(r.ok) << r.message;
}

// Rows reading shared teacher rows by index (JetSpec's teachers) give exactly what the gathered
// teacher gives (to the rounding of another chunking), and the argmax comes along.
TEST(LinearKlDiv, TeacherRowsByIndex) {
  const Tensor h0 = testing::rand_normal({N, H}, 21), w0 = testing::rand_normal({V, H}, 22);
  const Tensor shared = testing::rand_normal({3, V}, 23);
  std::vector<int64_t> rows;
  for (int64_t n = 0; n < N; ++n) rows.push_back((n * 2) % 3);
  const Tensor index = Tensor::from_vector(rows, {N});
  const Tensor gathered = index_select(shared, 0, index);
  const Var reference = linear_kl_div(Var(h0), Var(w0), gathered, 2.0);
  for (int64_t chunk : {int64_t{1}, int64_t{4}, N}) {
    Tensor argmax_out;
    const Var kl = linear_kl_div(Var(h0), Var(w0), shared, 2.0, chunk, index, &argmax_out);
    EXPECT_LE(testing::max_abs_diff(kl.value(), reference.value()), 1e-6) << chunk;
    EXPECT_EQ(argmax_out.to_vector<int64_t>(),
              argmax(matmul(h0, w0, false, true), 1).to_vector<int64_t>());
  }
  EXPECT_EQ(testing::invalid_argument_message([&] {
              linear_kl_div(Var(h0), Var(w0), shared, 1.0, 0, Tensor::zeros({2}, DType::i64));
            }),
            "[linear_kl_div] teacher_rows [2] must be (" + std::to_string(N) + ")");
}

TEST(LinearKlDiv, RejectsBadShapes) {
  const Var h(Tensor::zeros({4, H})), w(Tensor::zeros({V, H}));
  EXPECT_EQ(testing::invalid_argument_message([&] {
              linear_kl_div(h, w, Tensor::zeros({4, V + 1}));
            }),
            "[linear_kl_div] teacher [4, 8] must be (N, V) for hidden [4, 6] and weight [7, 6]");
  EXPECT_EQ(testing::invalid_argument_message([&] {
              linear_kl_div(h, Var(Tensor::zeros({V, 5})), Tensor::zeros({4, V}));
            }),
            "[linear_kl_div] hidden [4, 6] and weight [7, 5] must be (N, H) and (V, H)");
}

// Predictions at rows {0, 2, 2, 2, 5, 9, 9}: shared rows, skipped rows, the last row.
const std::vector<int64_t> kRows = {0, 2, 2, 2, 5, 9, 9};
Tensor prediction_targets() { return Tensor::from_vector<int64_t>({3, 0, 6, 0, 2, 1, 5}, {7}); }

TEST(LinearCrossEntropyAt, EqualsTheLossOfEachPredictionsRowAndComputesSharedRowsOnce) {
  const Tensor h0 = testing::rand_normal({N, H}, 11), w0 = testing::rand_normal({V, H}, 12);
  const Tensor seed = testing::rand_normal({7}, 13);
  const Tensor rows = Tensor::from_vector(kRows, {7});
  for (int64_t chunk : {int64_t{1}, int64_t{2}, int64_t{4}, int64_t{64}}) {
    Var h(h0.clone(), true), w(w0.clone(), true);
    Tensor entropy;
    const Var loss = linear_cross_entropy_at(h, w, kRows, prediction_targets(), chunk, &entropy);
    ASSERT_EQ(loss.shape(), (Shape{7}));
    loss.backward(seed);
    // Reference: every prediction's row copied out, then the plain per-row loss.
    Var hp(h0.clone(), true), wp(w0.clone(), true);
    const Var logits = matmul(index_select(hp, 0, rows), wp, false, true);
    const Var expected = cross_entropy(logits, prediction_targets());
    expected.backward(seed);
    EXPECT_TRUE(testing::all_close(loss.value(), expected.value(), 1e-6, 1e-5)) << chunk;
    EXPECT_TRUE(testing::all_close(h.grad(), hp.grad(), 1e-6, 1e-5)) << chunk;
    EXPECT_TRUE(testing::all_close(w.grad(), wp.grad(), 1e-6, 1e-5)) << chunk;
    // H = -sum p log p of each prediction's row.
    const Tensor p = softmax(logits.value(), 1);
    const Tensor naive_entropy = neg(sum(mul(p, log(p)), 1));
    EXPECT_TRUE(testing::all_close(entropy, naive_entropy, 1e-6, 1e-5)) << chunk;
    // Rows without a prediction get no gradient.
    EXPECT_EQ(testing::max_abs_diff(h.grad().select(0, 1), Tensor::zeros({H})), 0.0);
  }
}

TEST(LinearCrossEntropyAt, GradcheckF64WithSharedRows) {
  for (int64_t chunk : {int64_t{1}, int64_t{3}}) {
    const GradcheckResult r = gradcheck(
        [&](const std::vector<Var>& in) {
          return linear_cross_entropy_at(in[0], in[1], kRows, prediction_targets(), chunk);
        },
        {testing::rand_normal({N, H}, 14, DType::f64),
         testing::rand_normal({V, H}, 15, DType::f64)});
    EXPECT_TRUE(r.ok) << "chunk " << chunk << ": " << r.message;
  }
}

TEST(LinearCrossEntropyAt, NoPredictionGivesNoLossAndZeroGradients) {
  Var h(testing::rand_normal({N, H}, 20), true), w(testing::rand_normal({V, H}, 21), true);
  const Var loss = linear_cross_entropy_at(h, w, {}, Tensor::zeros({0}, DType::i64));
  EXPECT_EQ(loss.shape(), (Shape{0}));
  sum_all(loss).backward();
  EXPECT_EQ(testing::max_abs_diff(h.grad(), Tensor::zeros({N, H})), 0.0);
  EXPECT_EQ(testing::max_abs_diff(w.grad(), Tensor::zeros({V, H})), 0.0);
}

TEST(LinearCrossEntropyAt, RejectsRowsOutOfOrderOrRange) {
  const Var h(Tensor::zeros({4, H})), w(Tensor::zeros({V, H}));
  const Tensor t = Tensor::zeros({2}, DType::i64);
  EXPECT_EQ(testing::invalid_argument_message([&] {
              linear_cross_entropy_at(h, w, {2, 1}, t);
            }),
            "[linear_cross_entropy_at] rows must ascend within [0, 4), got 1 at 1");
  EXPECT_EQ(testing::invalid_argument_message([&] {
              linear_cross_entropy_at(h, w, {0, 4}, t);
            }),
            "[linear_cross_entropy_at] rows must ascend within [0, 4), got 4 at 1");
  EXPECT_EQ(testing::invalid_argument_message([&] { linear_cross_entropy_at(h, w, {0}, t); }),
            "[linear_cross_entropy_at] hidden [4, 6] must be (N, H) and targets [2] (1), one per "
            "row given");
}

TEST(PolicyGradientLosses, ReinforceAndPpoClippingByHand) {
  const std::vector<double> logp = {-1.0, -2.0, -0.5, -3.0}, old = {-1.0, -2.5, -0.7, -2.0};
  const std::vector<float> adv = {2.0f, 1.0f, -1.0f, -0.5f};
  const Tensor a = Tensor::from_vector(adv, {4});
  Var lp(Tensor::from_vector(logp, {4}), true);
  const Var plain = policy_gradient_losses(lp, a, Tensor(), 0.0);
  EXPECT_TRUE(testing::all_close(plain.value(),
                                 Tensor::from_vector<double>({2, 2, -0.5, -1.5}, {4}), 0, 1e-12));
  // eps 0.2: r = (1, e^0.5, e^0.2, e^-1). Entry 1 (A > 0, r > 1.2) and entry 3 (A < 0, r < 0.8)
  // are clipped to constants; entries 0 and 2 (A < 0, r > 1.2: the pessimistic side) keep -r A.
  int64_t clipped = -1;
  const Var ppo =
      policy_gradient_losses(lp, a, Tensor::from_vector(old, {4}, DType::f32), 0.2, &clipped);
  EXPECT_EQ(clipped, 2);
  const double r2 = std::exp(0.2);
  EXPECT_TRUE(testing::all_close(ppo.value(),
                                 Tensor::from_vector<double>({-2.0, -1.2, r2, 0.4}, {4}), 0, 1e-6));
  ppo.backward(Tensor::ones({4}, DType::f64));
  EXPECT_TRUE(
      testing::all_close(lp.grad(), Tensor::from_vector<double>({-2.0, 0, r2, 0}, {4}), 0, 1e-6));
  // The unit-advantage, unclipped loss is the negative log-likelihood.
  EXPECT_TRUE(testing::all_close(policy_gradient_losses(lp, Tensor::ones({4}), Tensor(), 0).value(),
                                 Tensor::from_vector<double>({1, 2, 0.5, 3}, {4}), 0, 1e-12));
}

TEST(PolicyGradientLosses, GradcheckF64ThroughTheHead) {
  const Tensor adv = testing::rand_normal({7}, 16);
  const Tensor old = mul(testing::rand_uniform({7}, 0.5, 2.0, 17), -1.0);
  for (double eps : {0.0, 0.2}) {
    const GradcheckResult r = gradcheck(
        [&](const std::vector<Var>& in) {
          return policy_gradient_losses(
              neg(linear_cross_entropy_at(in[0], in[1], kRows, prediction_targets(), 2)), adv, old,
              eps);
        },
        {testing::rand_normal({N, H}, 18, DType::f64),
         testing::rand_normal({V, H}, 19, DType::f64)});
    EXPECT_TRUE(r.ok) << "eps " << eps << ": " << r.message;
  }
}

TEST(PolicyGradientLosses, ClippingNeedsOldLogProbsOfEveryEntry) {
  const Var lp(Tensor::zeros({3}));
  EXPECT_EQ(testing::invalid_argument_message(
                [&] { policy_gradient_losses(lp, Tensor::zeros({2}), Tensor(), 0); }),
            "[policy_gradient_losses] advantages [2] must match logp [3]");
  EXPECT_EQ(testing::invalid_argument_message(
                [&] { policy_gradient_losses(lp, Tensor::zeros({3}), Tensor(), 0.2); }),
            "[policy_gradient_losses] clipping needs old log-probs [3], got none");
}

}  // namespace
}  // namespace sprig
