#include "speculative/evaluation.h"

#include <algorithm>

namespace sprig::speculative {

using json = nlohmann::json;

json metrics_json(double loss, const DraftMetrics& m, const DraftKind& kind) {
  json j = {{"loss", loss},
            {"loss_weight", m.loss_weight},
            {"accuracy", m.accuracy()},
            {"valid_tokens", m.valid_tokens},
            {"correct_tokens", m.correct_tokens},
            {"accept_len", m.accept_len()},
            {"accept_len_sum", m.accept_len_sum},
            {"valid_blocks", m.valid_blocks}};
  for (const auto& [name, value] : m.extra) j[name] = value;
  for (const DraftRatio& r : kind.extra_ratios())
    j[r.name] =
        m.sum(r.numerator) / (r.denominator == "loss_weight" ? kind.mean_denominator(m.loss_weight)
                                                             : std::max(m.sum(r.denominator), 1.0));
  return j;
}

TeacherForced::TeacherForced(const FrozenTarget& target, const DFlashDraft& draft,
                             const DraftSettings& settings, int64_t num_anchors, uint64_t seed)
    : target_(target),
      draft_(draft),
      kind_(draft.config().kind()),
      objective_(kind_.objective(settings)),
      num_anchors_(num_anchors),
      gen_(seed) {}

std::string TeacherForced::prepare(DraftBatch& batch) {
  if (!batch.anchors.anchors.defined()) {
    try {
      batch.anchors = sample_anchors(batch.rows, draft_.config().block_size, num_anchors_, gen_);
    } catch (const NoValidAnchors&) {
      ++skipped_;
      return "no valid anchor";
    }
  }
  objective_->complete(draft_.config(), batch, gen_);
  return "";
}

std::optional<DraftLoss> TeacherForced::score(const DraftBatch& batch, Tensor* logits) {
  DraftLoss loss;
  try {
    loss = objective_->loss(target_, draft_, batch, logits);
  } catch (const NoValidAnchors&) {  // JetSpec: every label of the blocks is loss-masked
    ++skipped_;
    return std::nullopt;
  }
  if (loss.metrics.valid_blocks == 0) {
    ++skipped_;
    return std::nullopt;
  }
  weighted_loss_ += loss.value() * loss.metrics.loss_weight;
  sums_.add(loss.metrics);
  ++scored_;
  return loss;
}

std::optional<DraftMetrics> TeacherForced::metrics(DraftBatch batch) {
  NoGradGuard no_grad;
  if (!prepare(batch).empty()) return std::nullopt;
  const std::optional<DraftLoss> loss = score(batch);
  if (!loss) return std::nullopt;
  return loss->metrics;
}

json TeacherForced::aggregate() const {
  json j = metrics_json(weighted_loss_ / std::max(sums_.loss_weight, 1.0), sums_, kind_);
  j["records"] = scored_;
  j["skipped_records"] = skipped_;
  return j;
}

}  // namespace sprig::speculative
