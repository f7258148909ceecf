// What the draft tests share: random tokens below the golden drafts' mask token, one row unpacked
// or packing documents back to back, fixed anchors, a micro-batch's outcome (loss, metrics,
// logits, gradients) compared bit for bit, and a micro Qwen3 target for f64 gradient checks.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "autograd/gradcheck.h"
#include "nn/checkpoint.h"
#include "speculative/draft.h"
#include "speculative/objective.h"
#include "speculative/target.h"
#include "tests/test_util.h"

namespace sprig::speculative::testing_rows {

inline const std::string kGolden = testing::source_dir() + "/tests/golden/";
constexpr int64_t kMask = 95;  // the golden drafts' mask token, the last of qwen3_tiny's 96 ids

inline FrozenTarget golden_target(DType dtype = DType::f32) {
  return FrozenTarget(load_qwen(kGolden + "qwen3_tiny"), Device::cpu(), dtype);
}

inline std::vector<int64_t> tokens(uint64_t seed, int64_t S = 16) {
  Generator gen(seed);
  std::vector<int64_t> ids(static_cast<size_t>(S));
  for (auto& t : ids) t = gen.next_int(0, kMask);
  return ids;
}

inline DraftRows unpacked_row(const std::vector<int64_t>& ids) {
  DraftRows r;
  const auto S = static_cast<int64_t>(ids.size());
  r.input_ids = Tensor::from_vector(ids, {1, S});
  r.loss_mask = Tensor::ones({1, S}, DType::i64);
  return r;
}

// One row packing documents of `lens` (summing to the row's length) back to back.
inline DraftRows packed_row(const std::vector<int64_t>& ids, const std::vector<int64_t>& lens) {
  DraftRows r = unpacked_row(ids);
  std::vector<int64_t> pos, remaining;
  for (const int64_t n : lens)
    for (int64_t t = 0; t < n; ++t) {
      pos.push_back(t);
      remaining.push_back(n - 1 - t);
    }
  const auto S = static_cast<int64_t>(ids.size());
  r.position_ids = Tensor::from_vector(pos, {1, S});
  r.doc_remaining = Tensor::from_vector(remaining, {1, S});
  r.doc_lens = {lens};
  return r;
}

inline Anchors anchors_at(const std::vector<int64_t>& at) {
  const auto n = static_cast<int64_t>(at.size());
  return {Tensor::from_vector(at, {1, n}), Tensor::ones({1, n}, DType::boolean)};
}

inline bool bit_identical(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() &&
         a.to_vector<double>() == b.to_vector<double>();
}

// A micro-batch's loss, metrics, slot logits and every draft gradient.
struct Outcome {
  double loss = 0;
  DraftMetrics m;
  Tensor logits;
  std::map<std::string, Tensor> grads;
};

// The outcome of `loss` (its sum backpropagated into `draft`, whose gradients start at zero).
inline Outcome outcome_of(const DraftLoss& loss, Tensor logits, const DFlashDraft& draft) {
  loss.sum.backward();
  Outcome o{loss.value(), loss.metrics, std::move(logits), {}};
  for (const auto& [name, p] : draft.named_parameters()) o.grads[name] = p.grad();
  return o;
}

// Every field of two outcomes bit for bit (Domino's fields are 0 for the other drafts).
inline void expect_same(const Outcome& a, const Outcome& b) {
  EXPECT_EQ(a.loss, b.loss);
  const DraftMetrics &x = a.m, &y = b.m;
  for (const auto& [u, v] : {std::pair{x.loss_weight, y.loss_weight},
                             {x.valid_tokens, y.valid_tokens},
                             {x.correct_tokens, y.correct_tokens},
                             {x.accept_len_sum, y.accept_len_sum},
                             {x.valid_blocks, y.valid_blocks},
                             {x.sum("final_loss_sum"), y.sum("final_loss_sum")},
                             {x.sum("base_loss_sum"), y.sum("base_loss_sum")},
                             {x.sum("base_correct_tokens"), y.sum("base_correct_tokens")},
                             {x.sum("base_accept_len_sum"), y.sum("base_accept_len_sum")}})
    EXPECT_EQ(u, v);
  EXPECT_TRUE(bit_identical(a.logits, b.logits));
  ASSERT_EQ(a.grads.size(), b.grads.size());
  for (const auto& [name, g] : a.grads) EXPECT_TRUE(bit_identical(g, b.grads.at(name))) << name;
}

// A micro Qwen3 target (V 24, H 8, 2 layers) in f64 and one packed row of two documents (6 + 4
// tokens, partly supervised) for the whole-loss gradient checks.
inline QwenConfig micro_target_config() {
  return QwenConfig::from_json({{"model_type", "qwen3"},
                                {"vocab_size", 24},
                                {"hidden_size", 8},
                                {"intermediate_size", 12},
                                {"num_hidden_layers", 2},
                                {"num_attention_heads", 2},
                                {"num_key_value_heads", 1},
                                {"head_dim", 4}});
}

inline DraftRows micro_packed_row() {
  DraftRows rows;
  rows.input_ids = Tensor::from_vector<int64_t>({3, 9, 1, 17, 4, 22, 8, 0, 5, 12}, {1, 10});
  rows.loss_mask = Tensor::from_vector<int64_t>({0, 0, 1, 1, 1, 1, 0, 1, 1, 1}, {1, 10});
  rows.position_ids = Tensor::from_vector<int64_t>({0, 1, 2, 3, 4, 5, 0, 1, 2, 3}, {1, 10});
  rows.doc_remaining = Tensor::from_vector<int64_t>({5, 4, 3, 2, 1, 0, 3, 2, 1, 0}, {1, 10});
  rows.doc_lens = {{6, 4}};
  return rows;
}

// A one-layer draft with blocks of 3 for the micro target, on both its layers.
inline DraftOptions micro_draft_options() {
  DraftOptions o;
  o.num_layers = 1;
  o.block_size = 3;
  o.mask_token_id = 23;
  o.target_layer_ids = {0, 1};
  return o;
}

// The gradient of loss()'s mean (its kind's denominator) for every element of every draft
// parameter against central differences of the mean itself.
template <class LossFn>
void expect_gradients_match(DFlashDraft& draft, LossFn loss, const std::string& label) {
  draft.zero_grad();
  const DraftLoss l = loss();
  ASSERT_GT(l.metrics.loss_weight, 0) << label;
  l.mean().backward();
  for (const auto& [name, p] : draft.named_parameters()) {
    const Tensor numeric = numeric_gradient([&] { return loss().value(); }, p.value());
    EXPECT_LE(testing::max_abs_diff(p.grad(), numeric), 1e-7) << label << " " << name;
  }
}

}  // namespace sprig::speculative::testing_rows
