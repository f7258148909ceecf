// JetSpec drafts (docs/semantics.md §9.5) on the golden target qwen3_tiny: the teacher of slot k
// is the target's logits at anchor + k - 1 (E14, checked against a direct computation), the KL
// with its temperature, accuracy and acceptance against the teacher's argmax (E14's constant
// case), no supervised slot (E14) is the no-valid-anchors error, a packed row of one document
// equals the unpacked row, two packed documents are isolated, the draft's sliding window applies,
// and the loss's gradient in f64.
#include "speculative/jetspec.h"

#include <gtest/gtest.h>

#include "autograd/gradcheck.h"
#include "nn/checkpoint.h"
#include "tests/speculative/draft_test_util.h"
#include "tests/test_util.h"

namespace sprig::speculative {
namespace {

using namespace testing_rows;
constexpr int64_t kBs = 4;

// The golden DFlash draft's weights under a causal (JetSpec) config, with an optional window.
std::unique_ptr<DFlashDraft> jetspec_draft(int64_t window = 0) {
  auto plain = load_draft(kGolden + "dflash_tiny");
  DraftConfig c = plain->config();
  c.causal = true;
  c.sliding_window = window;
  Generator gen(0);
  auto draft = std::make_unique<DFlashDraft>(c, gen);
  draft->load_state_dict(plain->state_dict());
  return draft;
}

Outcome run(const FrozenTarget& target, const DraftRows& rows, const Anchors& anchors,
            double temperature = 1.0, int64_t window = 0) {
  auto draft = jetspec_draft(window);
  Tensor logits;
  const DraftLoss loss = jetspec_loss(target, *draft, rows, anchors, {temperature, 0}, &logits);
  return outcome_of(loss, logits, *draft);
}

TEST(JetSpec, E14TeacherIsTheTargetAtAnchorPlusKMinusOne) {
  const FrozenTarget target = golden_target();
  const int64_t S = 20;
  const DraftRows rows = unpacked_row(tokens(1, S));
  const Anchors anchors = anchors_at({2, 10});
  for (const double T : {1.0, 2.0}) {
    const Outcome o = run(target, rows, anchors, T);
    // Directly: the target's logits at positions [[2, 3, 4], [10, 11, 12]] against the slots
    // 1..3 of each block.
    Tensor teacher;
    target.capture(rows, {0}, &teacher);
    double kl_sum = 0, correct = 0;
    int64_t slot = 0;
    for (const int64_t a : {2, 10})
      for (int64_t k = 1; k < kBs; ++k, ++slot) {
        const Tensor t = teacher.select(0, 0).narrow(0, a + k - 1, 1);
        const Tensor s = o.logits.narrow(0, (slot / 3) * kBs + k, 1);
        kl_sum += kl_div(t, s, T).kl.item();
        correct += argmax(t, 1).item() == argmax(s, 1).item();
      }
    EXPECT_NEAR(o.loss, T * T * kl_sum / 6, 1e-6) << T;
    EXPECT_EQ(o.m.valid_tokens, 6);
    EXPECT_EQ(o.m.loss_weight, 6);
    EXPECT_EQ(o.m.correct_tokens, correct);
    EXPECT_EQ(o.m.valid_blocks, 2);
  }
}

TEST(JetSpec, E14ConstantLogitsAgreeingWithTheTeacherAcceptTheWholeBlock) {
  // Zero final norms: the target's and the draft's logits are all 0, argmax token 0 everywhere.
  auto model = load_qwen(kGolden + "qwen3_tiny");
  model->model.norm->weight.value().copy_(Tensor::zeros({model->config().hidden_size}));
  const FrozenTarget target(std::move(model), Device::cpu(), DType::f32);
  auto draft = jetspec_draft();
  draft->norm->weight.value().copy_(Tensor::zeros({draft->config().layers.hidden_size}));
  const DraftLoss l =
      jetspec_loss(target, *draft, unpacked_row(tokens(2, 16)), anchors_at({1, 7}), {});
  EXPECT_EQ(l.metrics.accuracy(), 1.0);
  EXPECT_EQ(l.metrics.accept_len(), kBs);  // bs - 1 accepted slots plus the bonus token
  EXPECT_NEAR(l.value(), 0.0, 1e-7);
}

TEST(JetSpec, E14NoSupervisedSlotIsTheNoValidAnchorsError) {
  const FrozenTarget target = golden_target();
  DraftRows rows = unpacked_row(tokens(3, 8));
  rows.loss_mask = Tensor::from_vector<int64_t>({1, 0, 0, 0, 1, 0, 0, 0}, {1, 8});
  Generator gen(0);
  const Anchors anchors = sample_anchors(rows, kBs, 8, gen);
  EXPECT_EQ(anchors.blocks(), 2);  // anchors 0 and 4 are valid
  auto draft = jetspec_draft();
  EXPECT_THROW(jetspec_loss(target, *draft, rows, anchors, {}), NoValidAnchors);
}

TEST(JetSpecPacking, OnePackedDocumentEqualsTheUnpackedRow) {
  const FrozenTarget target = golden_target();
  const std::vector<int64_t> ids = tokens(4, 16);
  expect_same(run(target, packed_row(ids, {16}), anchors_at({1, 5, 12}), 2.0),
              run(target, unpacked_row(ids), anchors_at({1, 5, 12}), 2.0));
}

TEST(JetSpecPacking, TwoPackedDocumentsAreIsolated) {
  const FrozenTarget target = golden_target();
  const std::vector<int64_t> ids = tokens(5, 16);
  std::vector<int64_t> changed = ids;
  for (int64_t t = 0; t < 9; ++t) changed[t] = (changed[t] + 11) % kMask;  // document 0 only
  // Blocks in document 1: the teacher (the target's logits there) and the draft see only it.
  expect_same(run(target, packed_row(ids, {9, 7}), anchors_at({9, 12})),
              run(target, packed_row(changed, {9, 7}), anchors_at({9, 12})));
}

TEST(JetSpec, TheDraftsSlidingWindowApplies) {
  const FrozenTarget target = golden_target();
  const DraftRows rows = unpacked_row(tokens(6, 16));
  const Anchors anchors = anchors_at({10});
  const Outcome full = run(target, rows, anchors), windowed = run(target, rows, anchors, 1.0, 3);
  EXPECT_GT(testing::max_abs_diff(full.logits, windowed.logits), 1e-4);
}

TEST(JetSpecGradcheck, WholeLossInF64) {
  const QwenConfig tc = micro_target_config();
  Generator gen(5);
  const FrozenTarget target(std::make_unique<QwenForCausalLM>(tc, gen), Device::cpu(), DType::f64);
  DraftOptions o = micro_draft_options();
  o.causal = true;
  DFlashDraft draft(draft_config_for(tc, o), gen);
  draft.to(Device::cpu(), DType::f64);
  const DraftRows rows = micro_packed_row();
  const Anchors anchors = anchors_at({2, 7});
  expect_gradients_match(
      draft,
      [&] {
        return jetspec_loss(target, draft, rows, anchors, {1.5, 2});
      },
      "jetspec");
}

}  // namespace
}  // namespace sprig::speculative
