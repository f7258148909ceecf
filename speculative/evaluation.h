// Teacher-forced evaluation of a draft (docs/semantics.md §9.7): each record's blocks at given or
// sampled anchors, scored by the objective of the draft's kind (speculative/draft_kind.h), and the
// aggregate validation combines: the loss weighted by loss_weight, every ratio from its summed
// numerator and denominator. `sprig eval`, `sprig spec-eval` and the demo evaluate through it.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "speculative/draft_kind.h"

namespace sprig::speculative {

// The metrics of a record or of an aggregate: loss, the common sums and ratios, the kind's own
// sums and its ratios (one over loss_weight divides as the loss does, by mean_denominator).
nlohmann::json metrics_json(double loss, const DraftMetrics& metrics, const DraftKind& kind);

class TeacherForced {
 public:
  // `draft` (of any kind) must fit `target` and be on its device in its dtype. Anchors are sampled
  // at most `num_anchors` per row, and they and the objective's other draws come from `seed`.
  TeacherForced(const FrozenTarget& target, const DFlashDraft& draft, const DraftSettings& settings,
                int64_t num_anchors, uint64_t seed);

  const DraftKind& kind() const { return kind_; }
  // Samples the anchors of a batch that has none and makes the objective's draws; returns why
  // nothing can be scored ("no valid anchor"), or "". Throws std::invalid_argument for a batch
  // the objective cannot score (given prefix lengths without the variable-prefix loss).
  std::string prepare(DraftBatch& batch);
  // The loss and metrics of a prepared batch, with a graph unless grad mode is off; with
  // `logits`, every slot's logits (B * Q, V) f32 on the CPU. A batch without a supervised slot
  // scores nothing: nullopt (counted as skipped). Scored batches add to the aggregate.
  std::optional<DraftLoss> score(const DraftBatch& batch, Tensor* logits = nullptr);
  // prepare, then score under no_grad; nullopt for a batch that scores nothing.
  std::optional<DraftMetrics> metrics(DraftBatch batch);

  int64_t scored() const { return scored_; }
  int64_t skipped() const { return skipped_; }
  const DraftMetrics& sums() const { return sums_; }
  // metrics_json of every scored batch with records and skipped_records.
  nlohmann::json aggregate() const;

 private:
  const FrozenTarget& target_;
  const DFlashDraft& draft_;
  const DraftKind& kind_;
  std::unique_ptr<DraftObjective> objective_;
  int64_t num_anchors_;
  Generator gen_;
  double weighted_loss_ = 0;
  DraftMetrics sums_;
  int64_t scored_ = 0, skipped_ = 0;
};

}  // namespace sprig::speculative
