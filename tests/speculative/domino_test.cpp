// Domino drafts (docs/semantics.md §9.4) on the golden target qwen3_tiny: the worked example E13
// (first corrected slot, decay weights, the curriculum, the shifted label cut at the document
// end), the loss mix at lambda 0 and 1, a packed row of one document equal to the unpacked row,
// two packed documents isolated, and the loss's gradient in f64, for both shift_label settings.
#include "speculative/domino.h"

#include <gtest/gtest.h>

#include "autograd/gradcheck.h"
#include "nn/checkpoint.h"
#include "tests/speculative/draft_test_util.h"
#include "tests/test_util.h"

namespace sprig::speculative {
namespace {

using namespace testing_rows;
constexpr int64_t kS = 16, kBs = 4;

std::unique_ptr<DFlashDraft> domino_draft(const QwenConfig& target, bool shift_label,
                                          int64_t prefix = 1) {
  DraftOptions o;
  o.num_layers = 1;
  o.block_size = kBs;
  o.mask_token_id = kMask;
  o.target_layer_ids = {0, 1};
  o.head = domino_head({.emb_dim = 8,
                        .gru_hidden_dim = 6,
                        .pure_draft_prefix_len = prefix,
                        .shift_label = shift_label});
  Generator gen(11);
  auto draft = std::make_unique<DFlashDraft>(draft_config_for(target, o), gen);
  // Larger head weights than the initialisation's, so the correction moves the logits.
  const DominoHeadModule& head = domino_head_module(*draft);
  for (const Var& w : {head.embed_proj_in.weight, head.embed_proj_out.weight})
    w.value().copy_(testing::rand_normal(w.shape(), 3, w.dtype()));
  return draft;
}

Outcome run(const FrozenTarget& target, bool shift, const DraftRows& rows, const Anchors& anchors,
            double lambda = 0.3) {
  auto draft = domino_draft(target.config(), shift);
  Tensor logits;
  const DraftLoss loss = domino_loss(target, *draft, rows, anchors, {7.0, lambda}, &logits);
  return outcome_of(loss, logits, *draft);
}

TEST(Domino, E13FirstCorrectedSlotAndDecayWeights) {
  const auto first = [](int64_t p, bool shift) {
    return DominoHeadConfig{.pure_draft_prefix_len = p, .shift_label = shift}
        .first_corrected_slot();
  };
  EXPECT_EQ(first(1, true), 1);
  EXPECT_EQ(first(1, false), 2);
  EXPECT_EQ(first(2, true), 2);
  const std::vector<double> shifted = {1, 0.866878, 0.751477, 0.651439};
  for (int64_t k = 0; k < 4; ++k) {
    EXPECT_NEAR(domino_slot_weight(k, true, 7.0), shifted[k], 1e-6);
    if (k > 0) {
      EXPECT_NEAR(domino_slot_weight(k, false, 7.0), shifted[k - 1], 1e-6);
    }
  }
  EXPECT_EQ(domino_slot_weight(3, true, 0.0), 1.0);  // no decay
}

TEST(Domino, E13LambdaCurriculum) {
  EXPECT_EQ(domino_lambda_base(0, 100, 1, 1.0), 1.0);
  EXPECT_EQ(domino_lambda_base(50, 100, 1, 1.0), 0.5);
  EXPECT_EQ(domino_lambda_base(100, 100, 1, 1.0), 0.0);
  EXPECT_EQ(domino_lambda_base(200, 100, 1, 1.0), 0.0);
  EXPECT_EQ(domino_lambda_base(50, 100, 1, 0.5), 0.0);
  EXPECT_EQ(domino_lambda_base(25, 100, 1, 0.5), 0.5);
  EXPECT_EQ(domino_lambda_base(0, 0, 1, 0.5), 1.0);
}

TEST(Domino, E13ShiftedLabelCrossingIntoTheNextDocumentIsDropped) {
  const FrozenTarget target = golden_target();
  std::vector<int64_t> ids = tokens(5);
  // Documents 8 + 8, anchor 4 (3 tokens left in its document): labels 5, 6, 7 and 8.
  const Outcome packed = run(target, true, packed_row(ids, {8, 8}), anchors_at({4}));
  const Outcome unpacked = run(target, true, unpacked_row(ids), anchors_at({4}));
  EXPECT_EQ(packed.m.valid_tokens, 3);
  EXPECT_EQ(unpacked.m.valid_tokens, 4);
  // Unshifted, the block's labels are 4..7 (slot 0 unsupervised): nothing crosses.
  EXPECT_EQ(run(target, false, packed_row(ids, {8, 8}), anchors_at({4})).m.valid_tokens, 3);
}

TEST(Domino, LambdaMixesTheFinalAndBaseLosses) {
  const FrozenTarget target = golden_target();
  const DraftRows rows = unpacked_row(tokens(6));
  const Anchors anchors = anchors_at({1, 6, 11});
  for (const bool shift : {true, false}) {
    const Outcome base = run(target, shift, rows, anchors, 1.0);
    const Outcome final = run(target, shift, rows, anchors, 0.0);
    const double denominator = base.m.loss_weight + 1e-6;
    // To f32 rounding: the loss sums the weighted rows on the device, the metrics on the host.
    EXPECT_NEAR(base.loss, base.m.sum("base_loss_sum") / denominator, 1e-6 * base.loss);
    EXPECT_NEAR(final.loss, final.m.sum("final_loss_sum") / denominator, 1e-6 * final.loss);
    // The head changes the corrected slots' logits: the two losses differ.
    EXPECT_GT(std::abs(final.m.sum("final_loss_sum") - final.m.sum("base_loss_sum")), 1e-3);
    const Outcome mixed = run(target, shift, rows, anchors, 0.25);
    EXPECT_NEAR(mixed.loss, 0.75 * final.loss + 0.25 * base.loss, 1e-6 * mixed.loss);
    // At lambda 1 the head gets no gradient, at lambda 0 it does.
    EXPECT_EQ(testing::max_abs_diff(base.grads.at("embed_proj.2.weight"),
                                    Tensor::zeros(base.grads.at("embed_proj.2.weight").shape())),
              0.0);
    EXPECT_GT(
        testing::max_abs_diff(final.grads.at("prefix_gru.weight_hh_l0"),
                              Tensor::zeros(final.grads.at("prefix_gru.weight_hh_l0").shape())),
        0.0);
  }
}

TEST(DominoPacking, OnePackedDocumentEqualsTheUnpackedRow) {
  const FrozenTarget target = golden_target();
  const std::vector<int64_t> ids = tokens(3);
  for (const bool shift : {true, false})
    expect_same(run(target, shift, packed_row(ids, {kS}), anchors_at({1, 5, 11})),
                run(target, shift, unpacked_row(ids), anchors_at({1, 5, 11})));
}

TEST(DominoPacking, TwoPackedDocumentsAreIsolated) {
  const FrozenTarget target = golden_target();
  const std::vector<int64_t> ids = tokens(4);
  std::vector<int64_t> changed = ids;
  for (int64_t t = 0; t < 9; ++t) changed[t] = (changed[t] + 11) % kMask;  // document 0 only
  for (const bool shift : {true, false}) {
    // Blocks in document 1 only: loss, metrics and every gradient ignore document 0.
    const Anchors in_doc1 = anchors_at({9, 12});
    expect_same(run(target, shift, packed_row(ids, {9, 7}), in_doc1),
                run(target, shift, packed_row(changed, {9, 7}), in_doc1));
    // Blocks in both: document 1's slot logits stay bit-identical, document 0's move.
    const Anchors in_both = anchors_at({2, 9, 12});
    const Outcome a = run(target, shift, packed_row(ids, {9, 7}), in_both);
    const Outcome b = run(target, shift, packed_row(changed, {9, 7}), in_both);
    EXPECT_TRUE(bit_identical(a.logits.slice(0, kBs, 3 * kBs), b.logits.slice(0, kBs, 3 * kBs)));
    EXPECT_GT(testing::max_abs_diff(a.logits.slice(0, 0, kBs), b.logits.slice(0, 0, kBs)), 1e-3);
  }
}

// A micro target and Domino draft in f64: the gradient of the mixed loss for every draft
// parameter element (the head included) against central differences.
TEST(DominoGradcheck, WholeLossInF64) {
  const QwenConfig tc = micro_target_config();
  Generator gen(5);
  const FrozenTarget target(std::make_unique<QwenForCausalLM>(tc, gen), Device::cpu(), DType::f64);
  const DraftRows rows = micro_packed_row();
  for (const bool shift : {true, false}) {
    DraftOptions o = micro_draft_options();
    o.head = domino_head(
        {.emb_dim = 3, .gru_hidden_dim = 2, .pure_draft_prefix_len = 1, .shift_label = shift});
    DFlashDraft draft(draft_config_for(tc, o), gen);
    draft.to(Device::cpu(), DType::f64);
    const DominoHeadModule& head = domino_head_module(draft);
    for (const Var& w : {head.embed_proj_in.weight, head.embed_proj_out.weight})
      w.value().copy_(testing::rand_normal(w.shape(), 8, DType::f64));
    const Anchors anchors = anchors_at({2, 6});
    expect_gradients_match(
        draft,
        [&] {
          return domino_loss(target, draft, rows, anchors, {2.0, 0.3});
        },
        shift ? "shifted" : "unshifted");
  }
}

// The fused head loss itself: both rows of (2, N) against central differences, every input.
TEST(DominoGradcheck, HeadLossInF64) {
  const Var h(testing::rand_normal({5, 4}, 1, DType::f64), true);
  const Var w(testing::rand_normal({7, 4}, 2, DType::f64), true);
  const Var e(testing::rand_normal({5, 3}, 3, DType::f64), true);
  const Var p(testing::rand_normal({7, 3}, 4, DType::f64), true);
  const Tensor targets = Tensor::from_vector<int64_t>({0, 6, -100, 3, 2}, {5});
  const Tensor mix = testing::rand_normal({2, 5}, 5, DType::f64);
  const auto value = [&] {
    return sum_all(domino_head_loss(h, w, e, p, targets, nullptr, nullptr, 2) * Var(mix))
        .value()
        .item();
  };
  Tensor base, final;
  const Var out = domino_head_loss(h, w, e, p, targets, &base, &final, 2);
  sum_all(out * Var(mix)).backward();
  for (const Var* v : {&h, &w, &e, &p})
    EXPECT_LE(testing::max_abs_diff(v->grad(), numeric_gradient(value, v->value())), 1e-8);
  // An ignored row gives 0 in both losses; argmax of the corrected logits.
  EXPECT_EQ(out.value().select(1, 2).to_vector<double>(), std::vector<double>({0, 0}));
  const Tensor logits =
      add(matmul(h.value(), w.value(), false, true), matmul(e.value(), p.value(), false, true));
  EXPECT_EQ(final.to_vector<int64_t>(), argmax(logits, 1).to_vector<int64_t>());
  EXPECT_EQ(base.to_vector<int64_t>(),
            argmax(matmul(h.value(), w.value(), false, true), 1).to_vector<int64_t>());
}

TEST(Domino, BlocksShiftTheirLabelsAndKeepTheDraftsWindow) {
  DraftConfig c = domino_draft(golden_target().config(), true)->config();
  c.sliding_window = 5;
  BlockOptions o = block_options(c);
  EXPECT_EQ(o.sliding_window, 5);
  EXPECT_FALSE(o.causal);
  EXPECT_EQ(o.label_start, 1);
  EXPECT_TRUE(o.labels_within_document);
  DominoHeadConfig unshifted = domino_head_config(c);
  unshifted.shift_label = false;
  c.head = domino_head(unshifted);
  o = block_options(c);
  EXPECT_EQ(o.label_start, 0);
  EXPECT_FALSE(o.labels_within_document);
}

TEST(Domino, ADraftWithoutTheHeadIsRefused) {
  const FrozenTarget target = golden_target();
  auto plain = load_draft(kGolden + "dflash_tiny");
  EXPECT_EQ(testing::invalid_argument_message(
                [&] { domino_loss(target, *plain, unpacked_row(tokens(1)), anchors_at({1}), {}); }),
            "[draft] the draft is a dflash draft: a Domino recipe needs "
            "dflash_config.projector_type domino (prefix_gru and embed_proj)");
}

}  // namespace
}  // namespace sprig::speculative
