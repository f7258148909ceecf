// Gradient checks (f64, central differences) of matmul (every transpose flag, batched and
// broadcast b) and the fused ops: rms_norm, rope, swiglu, cross_entropy, kl_div.
#include <gtest/gtest.h>

#include "tests/autograd/gradcheck_util.h"

namespace sprig {
namespace {

using testing::all_close;
using testing::grad_ok;
using testing::randn64;

using Inputs = const std::vector<Var>&;

// The stored shape of a matmul operand whose logical shape is `logical`: the last two dims are
// swapped when it is passed transposed.
Shape stored_shape(Shape logical, bool transposed) {
  if (transposed) std::swap(logical[logical.size() - 1], logical[logical.size() - 2]);
  return logical;
}

TEST(NnGrad, MatmulEveryTransposeAndBatchLayout) {
  // a: [M, K] or [B, M, K]; b: [K, N] or [B, K, N] (a 2-D b broadcasts over the batch).
  const std::pair<Shape, Shape> layouts[] = {
      {{3, 4}, {4, 5}}, {{2, 3, 4}, {2, 4, 5}}, {{2, 3, 4}, {4, 5}}};
  for (const auto& [a_logical, b_logical] : layouts) {
    for (bool trans_a : {false, true}) {
      for (bool trans_b : {false, true}) {
        SCOPED_TRACE(shape_str(a_logical) + " @ " + shape_str(b_logical) +
                     (trans_a ? " trans_a" : "") + (trans_b ? " trans_b" : ""));
        EXPECT_TRUE(grad_ok(
            [trans_a, trans_b](Inputs in) { return matmul(in[0], in[1], trans_a, trans_b); },
            {randn64(stored_shape(a_logical, trans_a), 1),
             randn64(stored_shape(b_logical, trans_b), 2)}));
      }
    }
  }
}

TEST(NnGrad, RmsNormWithRespectToInputAndWeight) {
  EXPECT_TRUE(grad_ok([](Inputs in) { return rms_norm(in[0], in[1], 1e-6); },
                      {randn64({2, 3, 8}, 3), randn64({8}, 4)}));
}

TEST(NnGrad, Rope) {
  const Tensor pos = Tensor::from_vector<int64_t>({0, 1, 2, 7, 3, 0}, {2, 3});
  EXPECT_TRUE(grad_ok([pos](Inputs in) { return rope(in[0], pos, rope_frequencies(4, 10000.0)); },
                      {randn64({2, 3, 2, 4}, 5)}));
  RopeFrequencies yarn_like = rope_frequencies(4, 10000.0);  // scaled cos/sin, as YaRN's
  yarn_like.attention_scaling = 1.25f;
  EXPECT_TRUE(grad_ok([pos, yarn_like](Inputs in) { return rope(in[0], pos, yarn_like); },
                      {randn64({2, 3, 2, 4}, 6)}));
}

TEST(NnGrad, Swiglu) {
  EXPECT_TRUE(grad_ok([](Inputs in) { return swiglu(in[0], in[1]); },
                      {randn64({3, 5}, 6), randn64({3, 5}, 7)}));
}

TEST(NnGrad, CrossEntropyWithIgnoredRows) {
  const Tensor targets = Tensor::from_vector<int64_t>({2, -100, 0, 6, -100}, {5});
  EXPECT_TRUE(grad_ok([targets](Inputs in) { return cross_entropy(in[0], targets); },
                      {randn64({5, 7}, 8)}));
  const Tensor custom = Tensor::from_vector<int64_t>({3, 1, 3}, {3});
  EXPECT_TRUE(grad_ok([custom](Inputs in) { return cross_entropy(in[0], custom, 3); },
                      {randn64({3, 4}, 9)}));

  // Ignored rows: zero loss and exactly zero gradient.
  Var logits(randn64({5, 7}, 10), true);
  Var loss = cross_entropy(logits, targets);
  EXPECT_EQ(loss.value().to_vector<double>()[1], 0.0);
  sum_all(loss).backward();
  EXPECT_TRUE(all_close(logits.grad().select(0, 4), Tensor::zeros({7}, DType::f64), 0));
}

TEST(NnGrad, KlDiv) {
  const Tensor teacher = randn64({3, 6}, 11);
  for (double temperature : {1.0, 2.0}) {
    SCOPED_TRACE(temperature);
    EXPECT_TRUE(
        grad_ok([teacher, temperature](Inputs in) { return kl_div(in[0], teacher, temperature); },
                {randn64({3, 6}, 12)}));
  }
  // KL of a distribution with itself is 0 and so is its gradient.
  Var student(teacher.clone(), true);
  Var kl = kl_div(student, teacher, 1.5);
  EXPECT_TRUE(all_close(kl.value(), Tensor::zeros({3}, kl.dtype()), 1e-12));
  sum_all(kl).backward();
  EXPECT_TRUE(all_close(student.grad(), Tensor::zeros({3, 6}, DType::f64), 1e-12));
}

}  // namespace
}  // namespace sprig
