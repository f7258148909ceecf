// The losses and metrics of DFlash drafts (docs/semantics.md §9): the decay-weighted block
// cross-entropy (`dflash`), the variable-prefix loss, token accuracy and the bonus-inclusive
// acceptance length. The LM head is the target's, frozen; logits are evaluated in row chunks and
// never held for the whole micro-batch.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "autograd/var.h"
#include "speculative/blocks.h"
#include "speculative/draft.h"

namespace sprig::speculative {

enum class DraftLossType { dflash, variable_prefix };
DraftLossType loss_type_from_name(const std::string& name);  // "dflash" | "variable_prefix"
const char* loss_type_name(DraftLossType type);

struct ObjectiveOptions {
  DraftLossType type = DraftLossType::dflash;
  double gamma = 7.0;  // decay of the slot weights, exp(-d / gamma); <= 0: no decay
};

// The sums of one micro-batch (validation and logging windows add them up): those every kind has,
// and a kind's own (Domino's base-logit metrics) by name.
struct DraftMetrics {
  double loss_weight = 0;  // sum of the supervised slots' weights (the loss divides by it)
  double valid_tokens = 0, correct_tokens = 0;  // supervised slots, those the draft gets right
  double accept_len_sum = 0, valid_blocks = 0;  // acceptance lengths (+1 bonus) of blocks with
                                                // a supervised slot, and their count
  double micro_batches = 0;                     // 1 per loss
  std::map<std::string, double> extra;          // a kind's own sums

  double accuracy() const { return correct_tokens / std::max(valid_tokens, 1.0); }
  double accept_len() const { return accept_len_sum / std::max(valid_blocks, 1.0); }
  // A sum by name: a common field's ("valid_tokens") or a kind's own (0 when absent).
  double sum(const std::string& name) const;
  void add(const DraftMetrics& other);  // sums every field
};

struct DraftLoss {
  Var sum;  // 0-dim: the weighted sum of the supervised slots' losses
  DraftMetrics metrics;
  double denominator = 1;  // what the mean divides by: the kind's mean_denominator(loss_weight)
  double value() const { return sum.value().item() / denominator; }  // the micro-batch's loss
  Var mean() const { return sum * (1.0 / denominator); }
};

// The denominator of the DFlash and Domino losses: loss_weight + 1e-6, as the reference's.
inline double weighted_mean_denominator(double loss_weight) { return loss_weight + 1e-6; }

// Acceptance over blocks of `slots` predictions: a slot is fine when its prediction is right or it
// is not supervised; a block accepts the fine slots before the first wrong one, counting only the
// supervised ones, plus the verifier's bonus token, when any of its slots is supervised
// (docs/semantics.md §9.2). pred, target and valid hold blocks * slots values.
struct Acceptance {
  std::vector<int64_t> accepted;  // per block, bonus excluded
  double accept_len_sum = 0, valid_blocks = 0;
};
Acceptance acceptance(const std::vector<int64_t>& pred, const std::vector<int64_t>& target,
                      const std::vector<bool>& valid, int64_t slots);

// The slot weights of a block: dflash w_k = exp(-(k - 1) / gamma) for k in [1, bs); variable prefix
// with prefix length l: exp(-(k - l) / gamma) for k >= l (ones when gamma <= 0).
double slot_weight(DraftLossType type, int64_t slot, int64_t prefix_length, double gamma);

// Every slot's logits (B * Q, V) of slot hidden states (B, Q, H) through the head (V, H), without
// a graph, in the hidden states' dtype and device (evaluation dumps).
Tensor slot_logits(const Var& hidden, const Var& head);

// The loss and metrics of the draft's slot hidden states (B, Q, H) against `blocks`, through the
// frozen head (V, H), whose rows blocks.target_ids name; a negative one is a token outside a
// draft vocabulary (docs/semantics.md §9.10): supervised, it counts as a miss and has no loss.
// `prefix_lengths` (B, N) is the variable-prefix loss's. With `logits`, also every slot's logits (B
// * Q, V) f32 on the CPU (for evaluation dumps).
DraftLoss draft_loss(const Var& hidden, const Var& head, const Blocks& blocks,
                     const ObjectiveOptions& options, const Tensor& prefix_lengths = {},
                     Tensor* logits = nullptr);

}  // namespace sprig::speculative
