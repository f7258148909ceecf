// DFlash end to end on the golden pair (tests/golden: the qwen3_tiny target, the dflash_tiny
// draft): the target's capture keeps packed documents apart, a packed row of one document trains
// exactly like the unpacked row, two packed documents cannot see each other, the target's logits
// come with the capture on request, and the whole draft loss passes a gradient check in f64.
#include "speculative/dflash.h"

#include <gtest/gtest.h>

#include "autograd/gradcheck.h"
#include "nn/checkpoint.h"
#include "tests/speculative/draft_test_util.h"
#include "tests/test_util.h"

namespace sprig::speculative {
namespace {

using namespace testing_rows;
constexpr int64_t kS = 16;

Outcome run(const FrozenTarget& target, const DraftRows& rows, const Anchors& anchors) {
  auto draft = load_draft(kGolden + "dflash_tiny");
  Tensor logits;
  const DraftLoss loss = dflash_loss(target, *draft, rows, anchors, {}, {}, &logits);
  return outcome_of(loss, logits, *draft);
}

TEST(FrozenTarget, PackedDocumentsAreCapturedApart) {
  const FrozenTarget target = golden_target();
  const std::vector<int64_t> ids = tokens(1);
  std::vector<int64_t> changed = ids;
  for (int64_t t = 0; t < 9; ++t) changed[t] = (changed[t] + 7) % kMask;  // document 0 only
  const std::vector<int64_t> layers = {0, 1};
  const Tensor a = target.capture(packed_row(ids, {9, 7}), layers);
  const Tensor b = target.capture(packed_row(changed, {9, 7}), layers);
  ASSERT_EQ(a.shape(), (Shape{1, kS, 2 * target.config().hidden_size}));
  EXPECT_TRUE(bit_identical(a.slice(1, 9, kS), b.slice(1, 9, kS)));
  EXPECT_GT(testing::max_abs_diff(a.slice(1, 0, 9), b.slice(1, 0, 9)), 1e-3);
  // Document 1 is captured as if it were a row of its own (to rounding: the matmuls see other
  // row counts).
  const std::vector<int64_t> doc1(ids.begin() + 9, ids.end());
  EXPECT_LE(testing::max_abs_diff(a.slice(1, 9, kS), target.capture(unpacked_row(doc1), layers)),
            1e-5);
  // The target's logits on request: those of its own forward; the capture is unchanged.
  Tensor logits;
  const DraftRows row = unpacked_row(ids);
  EXPECT_TRUE(bit_identical(target.capture(row, layers, &logits), target.capture(row, layers)));
  const QwenForCausalLM& model = target.model();
  const Var reference = model.logits(model.hidden(causal_input(row.input_ids, model.config())));
  EXPECT_TRUE(bit_identical(logits, reference.value()));
}

TEST(FrozenTarget, CapturesTheChosenLayersInOrder) {
  const FrozenTarget target = golden_target();
  const DraftRows row = unpacked_row(tokens(2));
  const int64_t H = target.config().hidden_size;
  const Tensor both = target.capture(row, {1, 0});
  EXPECT_TRUE(bit_identical(both.slice(2, 0, H), target.capture(row, {1})));
  EXPECT_TRUE(bit_identical(both.slice(2, H, 2 * H), target.capture(row, {0})));
  EXPECT_THROW(target.capture(row, {2}), std::invalid_argument);  // the target has 2 layers
}

TEST(DFlashPacking, OnePackedDocumentEqualsTheUnpackedRow) {
  const FrozenTarget target = golden_target();
  const std::vector<int64_t> ids = tokens(3);
  const Anchors anchors = anchors_at({1, 5, 12});
  expect_same(run(target, packed_row(ids, {kS}), anchors), run(target, unpacked_row(ids), anchors));
}

TEST(DFlashPacking, TwoPackedDocumentsAreIsolated) {
  const FrozenTarget target = golden_target();
  const std::vector<int64_t> ids = tokens(4);
  std::vector<int64_t> changed = ids;
  for (int64_t t = 0; t < 9; ++t) changed[t] = (changed[t] + 11) % kMask;
  // Blocks in document 1 only: nothing of the run depends on document 0.
  const Anchors in_doc1 = anchors_at({9, 12});
  expect_same(run(target, packed_row(ids, {9, 7}), in_doc1),
              run(target, packed_row(changed, {9, 7}), in_doc1));
  // Blocks in both: document 1's block logits stay bit-identical, document 0's move.
  const Anchors in_both = anchors_at({2, 9, 12});
  const Outcome a = run(target, packed_row(ids, {9, 7}), in_both);
  const Outcome b = run(target, packed_row(changed, {9, 7}), in_both);
  constexpr int64_t bs = 4;
  EXPECT_TRUE(bit_identical(a.logits.slice(0, bs, 3 * bs), b.logits.slice(0, bs, 3 * bs)));
  EXPECT_GT(testing::max_abs_diff(a.logits.slice(0, 0, bs), b.logits.slice(0, 0, bs)), 1e-3);
  // And document 1 alone, as its own unpacked row, gives the same block logits (to rounding).
  const std::vector<int64_t> doc1(ids.begin() + 9, ids.end());
  const Outcome alone = run(target, unpacked_row(doc1), anchors_at({0, 3}));
  EXPECT_LE(testing::max_abs_diff(a.logits.slice(0, bs, 3 * bs), alone.logits), 1e-5);
}

// A micro target and draft in f64: the draft loss's gradient for every draft parameter element
// against central differences of the loss itself.
TEST(DFlashGradcheck, WholeDraftLossInF64) {
  const QwenConfig tc = micro_target_config();
  Generator gen(5);
  const FrozenTarget target(std::make_unique<QwenForCausalLM>(tc, gen), Device::cpu(), DType::f64);
  DFlashDraft draft(draft_config_for(tc, micro_draft_options()), gen);
  draft.to(Device::cpu(), DType::f64);

  const DraftRows rows = micro_packed_row();
  const Anchors anchors = anchors_at({2, 7});
  for (const DraftLossType type : {DraftLossType::dflash, DraftLossType::variable_prefix}) {
    const ObjectiveOptions objective{.type = type, .gamma = 2.0};
    const Tensor prefix = type == DraftLossType::variable_prefix
                              ? Tensor::from_vector<int64_t>({2, 2}, {1, 2})
                              : Tensor();
    expect_gradients_match(
        draft, [&] { return dflash_loss(target, draft, rows, anchors, objective, prefix); },
        loss_type_name(type));
  }
}

}  // namespace
}  // namespace sprig::speculative
