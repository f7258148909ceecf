#include "speculative/objective.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "autograd/functions.h"
#include "nn/loss.h"

namespace sprig::speculative {

DraftLossType loss_type_from_name(const std::string& name) {
  if (name == "dflash") return DraftLossType::dflash;
  if (name == "variable_prefix") return DraftLossType::variable_prefix;
  throw std::invalid_argument("[draft] unknown loss_type '" + name +
                              "' (expected dflash or variable_prefix)");
}

const char* loss_type_name(DraftLossType type) {
  return type == DraftLossType::dflash ? "dflash" : "variable_prefix";
}

double DraftMetrics::sum(const std::string& name) const {
  const std::pair<const char*, double> common[] = {
      {"loss_weight", loss_weight},       {"valid_tokens", valid_tokens},
      {"correct_tokens", correct_tokens}, {"accept_len_sum", accept_len_sum},
      {"valid_blocks", valid_blocks},     {"micro_batches", micro_batches}};
  for (const auto& [key, value] : common)
    if (name == key) return value;
  const auto it = extra.find(name);
  return it == extra.end() ? 0.0 : it->second;
}

void DraftMetrics::add(const DraftMetrics& o) {
  loss_weight += o.loss_weight;
  valid_tokens += o.valid_tokens;
  correct_tokens += o.correct_tokens;
  accept_len_sum += o.accept_len_sum;
  valid_blocks += o.valid_blocks;
  micro_batches += o.micro_batches;
  for (const auto& [name, value] : o.extra) extra[name] += value;
}

Acceptance acceptance(const std::vector<int64_t>& pred, const std::vector<int64_t>& target,
                      const std::vector<bool>& valid, int64_t slots) {
  Acceptance a;
  const auto blocks = static_cast<int64_t>(pred.size()) / slots;
  for (int64_t j = 0; j < blocks; ++j) {
    int64_t accepted = 0;
    bool any = false, running = true;
    for (int64_t k = 0; k < slots; ++k) {
      const size_t i = static_cast<size_t>(j * slots + k);
      any = any || valid[i];
      running = running && (!valid[i] || pred[i] == target[i]);
      accepted += running && valid[i];
    }
    a.accepted.push_back(accepted);
    if (any) {
      a.accept_len_sum += static_cast<double>(accepted + 1);
      a.valid_blocks += 1;
    }
  }
  return a;
}

double slot_weight(DraftLossType type, int64_t slot, int64_t prefix_length, double gamma) {
  const int64_t distance = type == DraftLossType::dflash ? slot - 1 : slot - prefix_length;
  return gamma > 0 ? std::exp(-static_cast<double>(distance) / gamma) : 1.0;
}

DraftLoss draft_loss(const Var& hidden, const Var& head, const Blocks& blocks,
                     const ObjectiveOptions& o, const Tensor& prefix_lengths, Tensor* logits) {
  const int64_t B = hidden.size(0), Q = hidden.size(1), H = hidden.size(2), bs = blocks.block_size;
  const int64_t N = Q / bs;
  if (blocks.target_ids.shape() != Shape{B, N, bs})
    throw std::invalid_argument("[draft_loss] hidden " + shape_str(hidden.shape()) +
                                " does not match blocks of " + std::to_string(bs) + " slots " +
                                shape_str(blocks.target_ids.shape()));
  const bool vp = o.type == DraftLossType::variable_prefix;
  if (vp && prefix_lengths.shape() != Shape{B, N})
    throw std::invalid_argument(
        "[draft_loss] the variable-prefix loss needs prefix_lengths (B, N)");
  // Supervised slots: k >= 1 (slot 0 holds the anchor's own token), or k >= min(2, bs - 1).
  const int64_t first = vp ? std::min<int64_t>(2, bs - 1) : 1, K = bs - first;
  const std::vector<int64_t> ids = blocks.target_ids.to_vector<int64_t>();
  const std::vector<float> mask = blocks.block_mask.to_vector<float>();
  const std::vector<int64_t> prefix =
      vp ? prefix_lengths.to_vector<int64_t>() : std::vector<int64_t>(B * N, 0);

  // Per supervised row (b, j, k >= first): target (ignored when unsupervised) and weight.
  std::vector<int64_t> targets, truth;
  std::vector<double> weights;
  std::vector<bool> valid;
  for (int64_t bj = 0; bj < B * N; ++bj)
    for (int64_t k = first; k < bs; ++k) {
      const size_t i = static_cast<size_t>(bj * bs + k);
      const bool sup = mask[i] > 0.5f && (!vp || k >= prefix[bj]);
      const bool scored = sup && ids[i] >= 0;  // a negative label: outside the draft vocabulary
      valid.push_back(sup);
      truth.push_back(ids[i]);
      targets.push_back(scored ? ids[i] : -100);
      weights.push_back(scored ? slot_weight(o.type, k, prefix[bj], o.gamma) : 0.0);
    }
  const Var rows =
      reshape(contiguous(narrow(reshape(hidden, {B, N, bs, H}), 2, first, K)), {B * N * K, H});
  Tensor argmax;
  const Device dev = hidden.device();
  const Var nll = linear_cross_entropy(rows, head, Tensor::from_vector(targets, {B * N * K}, dev),
                                       -100, 0, &argmax);
  const Tensor w = Tensor::from_vector(weights, {B * N * K}).to(nll.dtype()).to(dev);
  DraftLoss out;
  out.sum = sum_all(nll * Var(w));

  const std::vector<int64_t> pred = argmax.to_vector<int64_t>();
  DraftMetrics& m = out.metrics;
  for (size_t i = 0; i < pred.size(); ++i) {
    m.loss_weight += weights[i];
    m.valid_tokens += valid[i];
    m.correct_tokens += valid[i] && pred[i] == truth[i];
  }
  const Acceptance a = acceptance(pred, truth, valid, K);
  m.accept_len_sum = a.accept_len_sum;
  m.valid_blocks = a.valid_blocks;
  m.micro_batches = 1;
  out.denominator = weighted_mean_denominator(m.loss_weight);

  if (logits) *logits = slot_logits(hidden, head).to(Device::cpu(), DType::f32);
  return out;
}

Tensor slot_logits(const Var& hidden, const Var& head) {
  NoGradGuard no_grad;
  return matmul(reshape(hidden, {hidden.size(0) * hidden.size(1), hidden.size(2)}), head, false,
                true)
      .value();
}

}  // namespace sprig::speculative
