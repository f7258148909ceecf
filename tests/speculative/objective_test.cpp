// The draft losses and metrics against the worked examples of docs/semantics.md: E10 (the decay
// loss, its weights, accuracy and acceptance), E11 (acceptance length, invalid slots), E12 (the
// variable-prefix weights), with logits made exact by an identity head.
#include "speculative/objective.h"

#include <gtest/gtest.h>

#include <cmath>

#include "tests/test_util.h"

namespace sprig::speculative {
namespace {

// Blocks of one row whose targets and supervision are given; the mask is irrelevant to the loss.
Blocks blocks_of(int64_t block_size, const std::vector<int64_t>& targets,
                 const std::vector<float>& supervised) {
  const auto n = static_cast<int64_t>(targets.size()) / block_size;
  Blocks b;
  b.block_size = block_size;
  b.target_ids = Tensor::from_vector(targets, {1, n, block_size});
  b.block_mask = Tensor::from_vector(supervised, {1, n, block_size});
  return b;
}

// Slot hidden states (1, Q, V) that are the logits themselves, through an identity head (V, V).
DraftLoss loss_of(const std::vector<float>& logits, int64_t V, const Blocks& blocks,
                  const ObjectiveOptions& o, const Tensor& prefix = {}) {
  const auto Q = static_cast<int64_t>(logits.size()) / V;
  std::vector<float> eye(static_cast<size_t>(V * V), 0.0f);
  for (int64_t v = 0; v < V; ++v) eye[v * V + v] = 1.0f;
  return draft_loss(Var(Tensor::from_vector(logits, {1, Q, V})),
                    Var(Tensor::from_vector(eye, {V, V})), blocks, o, prefix);
}

TEST(DFlashLoss, E10DecayWeightedLossAndMetrics) {
  // V = 3, bs = 3, one block: slot 1 logits [2, 0, 0] target 0, slot 2 logits [0, 1, 0] target 2.
  const std::vector<float> logits = {9, 9, 9, 2, 0, 0, 0, 1, 0};
  const Blocks b = blocks_of(3, {7, 0, 2}, {1, 1, 1});
  const DraftLoss l = loss_of(logits, 3, b, {.type = DraftLossType::dflash, .gamma = 1.0});
  EXPECT_NEAR(l.value(), 0.5923686, 1e-6);
  EXPECT_NEAR(l.metrics.loss_weight, 1.3678794, 1e-6);
  EXPECT_EQ(l.metrics.valid_tokens, 2);
  EXPECT_EQ(l.metrics.correct_tokens, 1);  // slot 2's argmax is 1
  EXPECT_EQ(l.metrics.accuracy(), 0.5);
  EXPECT_EQ(l.metrics.accept_len_sum, 2);  // one accepted, plus the bonus
  EXPECT_EQ(l.metrics.accept_len(), 2.0);
  // No decay (gamma <= 0): the plain mean.
  EXPECT_NEAR(loss_of(logits, 3, b, {.gamma = 0}).value(), 0.8954943, 1e-6);
  // The loss's gradient flows to the slots it supervises only.
  Var hidden(Tensor::from_vector(logits, {1, 3, 3}), true);
  std::vector<float> eye = {1, 0, 0, 0, 1, 0, 0, 0, 1};
  draft_loss(hidden, Var(Tensor::from_vector(eye, {3, 3})), b, {.gamma = 1.0}).sum.backward();
  EXPECT_EQ(testing::max_abs_diff(hidden.grad().select(1, 0), Tensor::zeros({1, 3})), 0.0);
  EXPECT_GT(testing::max_abs_diff(hidden.grad().select(1, 2), Tensor::zeros({1, 3})), 0.1);
}

TEST(DFlashLoss, E10DecayWeightsForBlock16Gamma7) {
  const std::vector<double> expected = {1,        0.866878, 0.751477, 0.651439, 0.564718,
                                        0.489542, 0.424373, 0.367879, 0.318907, 0.276453,
                                        0.239651, 0.207748, 0.180092, 0.156118, 0.135335};
  for (int64_t k = 1; k < 16; ++k)
    EXPECT_NEAR(slot_weight(DraftLossType::dflash, k, 0, 7.0), expected[k - 1], 1e-6) << k;
}

TEST(DFlashLoss, E11AcceptanceLength) {
  const std::vector<bool> all(8, true);
  const Acceptance a = acceptance({1, 2, 9, 4, 9, 2, 3, 4}, {1, 2, 3, 4, 1, 2, 3, 4}, all, 4);
  EXPECT_EQ(a.accepted, (std::vector<int64_t>{2, 0}));
  EXPECT_EQ(a.accept_len_sum, 4);
  EXPECT_EQ(a.valid_blocks, 2);
  // An invalid slot neither stops the run nor counts.
  const Acceptance b = acceptance({1, 2, 0, 4, 1, 2, 3, 4}, {1, 2, 3, 4, 1, 2, 3, 4},
                                  {true, true, false, true, true, true, true, true}, 4);
  EXPECT_EQ(b.accepted, (std::vector<int64_t>{3, 4}));
  // A block without any supervised slot is not a block of the statistics.
  const Acceptance c = acceptance({5, 5}, {1, 1}, {false, false}, 2);
  EXPECT_EQ(c.valid_blocks, 0);
  EXPECT_EQ(c.accept_len_sum, 0);
}

TEST(VariablePrefixLoss, E12WeightsStartAtThePrefix) {
  const double g = 7.0;
  EXPECT_EQ(slot_weight(DraftLossType::variable_prefix, 2, 2, g), 1.0);
  EXPECT_NEAR(slot_weight(DraftLossType::variable_prefix, 3, 2, g), std::exp(-1 / g), 1e-12);
  EXPECT_EQ(slot_weight(DraftLossType::variable_prefix, 3, 3, g), 1.0);
  // bs = 4, two blocks with prefixes 2 and 3: slots 2, 3 and slot 3 are supervised.
  std::vector<float> logits(8 * 4, 0.0f);
  const Blocks b = blocks_of(4, {0, 0, 1, 2, 0, 0, 0, 3}, std::vector<float>(8, 1.0f));
  const DraftLoss l = loss_of(logits, 4, b, {.type = DraftLossType::variable_prefix, .gamma = g},
                              Tensor::from_vector<int64_t>({2, 3}, {1, 2}));
  EXPECT_EQ(l.metrics.valid_tokens, 3);
  EXPECT_NEAR(l.metrics.loss_weight, 2 + std::exp(-1 / g), 1e-6);
  // Uniform logits over 4 tokens: every supervised slot costs log 4.
  EXPECT_NEAR(l.value(), std::log(4.0) * (2 + std::exp(-1 / g)) / (2 + std::exp(-1 / g) + 1e-6),
              1e-6);
}

TEST(DFlashLoss, RejectsMismatchedBlocks) {
  const Blocks b = blocks_of(3, {1, 2, 3}, {1, 1, 1});
  EXPECT_EQ(testing::invalid_argument_message(
                [&] { loss_of(std::vector<float>(6 * 3, 0.0f), 3, b, {}); }),
            "[draft_loss] hidden [1, 6, 3] does not match blocks of 3 slots [1, 1, 3]");
}

}  // namespace
}  // namespace sprig::speculative
