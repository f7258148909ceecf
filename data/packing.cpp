// Packers (docs/semantics.md §4): bin assignment and the row plans built from it.
#include "data/packing.h"

#include <algorithm>
#include <cstdio>
#include <iterator>
#include <limits>
#include <numeric>
#include <set>
#include <stdexcept>
#include <utility>

namespace sprig::data {

namespace {

constexpr const char* kPackingNames[] = {"dflash", "sft", "bfd", "fold", "padded"};

void check_lengths(const std::vector<int64_t>& lengths, int64_t capacity) {
  for (size_t i = 0; i < lengths.size(); ++i)
    if (lengths[i] < 1 || lengths[i] > capacity)
      throw std::invalid_argument("[pack] item " + std::to_string(i) + " has length " +
                                  std::to_string(lengths[i]) + ", outside [1, " +
                                  std::to_string(capacity) + "]");
}

}  // namespace

Packing packing_from_name(const std::string& name) {
  for (size_t i = 0; i < std::size(kPackingNames); ++i)
    if (name == kPackingNames[i]) return static_cast<Packing>(i);
  throw std::invalid_argument("[pack] unknown packing '" + name +
                              "' (expected dflash, padded, sft, bfd or fold)");
}

const char* packing_name(Packing packing) { return kPackingNames[static_cast<int>(packing)]; }

TargetForm target_form(Packing packing) {
  return packing == Packing::dflash || packing == Packing::padded ? TargetForm::loss_mask
                                                                  : TargetForm::labels;
}

std::vector<std::vector<int64_t>> fit_in_order(const std::vector<int64_t>& lengths,
                                               int64_t capacity) {
  check_lengths(lengths, capacity);
  std::vector<std::vector<int64_t>> bins;
  int64_t fill = 0;
  for (size_t i = 0; i < lengths.size(); ++i) {
    if (bins.empty() || fill + lengths[i] > capacity) {
      bins.emplace_back();
      fill = 0;
    }
    bins.back().push_back(static_cast<int64_t>(i));
    fill += lengths[i];
  }
  return bins;
}

std::vector<std::vector<int64_t>> fit_decreasing(const std::vector<int64_t>& lengths,
                                                 int64_t capacity, FitRule rule) {
  check_lengths(lengths, capacity);
  std::vector<int64_t> order(lengths.size());
  std::iota(order.begin(), order.end(), int64_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return lengths[a] > lengths[b]; });

  using Open = std::pair<int64_t, int64_t>;  // (fill, bin index): begin() is the least filled
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  std::set<Open> open;
  std::vector<std::vector<int64_t>> bins;
  for (int64_t item : order) {
    const int64_t len = lengths[item];
    auto chosen = open.end();
    if (rule == FitRule::worst) {
      if (!open.empty() && open.begin()->first + len <= capacity) chosen = open.begin();
    } else {
      // The fullest bin with fill <= capacity - len, lowest index among equally full ones.
      auto above = open.upper_bound({capacity - len, kMax});
      if (above != open.begin()) chosen = open.lower_bound({std::prev(above)->first, kMin});
    }
    if (chosen == open.end()) {
      open.insert({len, static_cast<int64_t>(bins.size())});
      bins.push_back({item});
    } else {
      const Open updated{chosen->first + len, chosen->second};
      open.erase(chosen);
      open.insert(updated);
      bins[updated.second].push_back(item);
    }
  }
  return bins;
}

double PackPlan::padding_fraction() const {
  const double capacity = static_cast<double>(rows.size()) * static_cast<double>(seq_len);
  return capacity > 0 ? 1.0 - static_cast<double>(tokens) / capacity : 0.0;
}

std::string PackPlan::summary() const {
  char padding[32];
  std::snprintf(padding, sizeof padding, "%.2f%%", 100.0 * padding_fraction());
  std::string s = std::to_string(documents) + " documents in " + std::to_string(rows.size()) +
                  " rows of " + std::to_string(seq_len) + " tokens, padding " + padding;
  if (truncated) s += ", " + std::to_string(truncated) + " truncated to " + std::to_string(seq_len);
  if (dropped_long) s += ", " + std::to_string(dropped_long) + " longer ones dropped";
  if (empty) s += ", " + std::to_string(empty) + " empty ones skipped";
  return s;
}

PackPlan plan_rows(const Corpus& corpus, const PackOptions& options) {
  const int64_t S = options.seq_len;
  if (S <= 0)
    throw std::invalid_argument("[pack] seq_len must be positive, got " + std::to_string(S));
  if (corpus.form != target_form(options.mode) || corpus.folded != (options.mode == Packing::fold))
    throw std::invalid_argument(std::string("[pack] the corpus does not suit ") +
                                packing_name(options.mode) +
                                " packing (dflash and padded pack loss_mask documents, sft and "
                                "bfd labels documents, fold rollout groups)");
  PackPlan plan;
  plan.seq_len = S;
  std::vector<int64_t> kept, lengths;  // documents that are packed, and how many of their tokens
  for (size_t d = 0; d < corpus.docs.size(); ++d) {
    int64_t len = corpus.docs[d].size();
    if (len == 0) {
      ++plan.empty;
      continue;
    }
    if (len > S) {
      if (target_form(options.mode) == TargetForm::loss_mask) {  // dflash, padded
        len = S;
        ++plan.truncated;
      } else if (options.drop_long_samples) {
        ++plan.dropped_long;
        continue;
      } else {
        throw std::invalid_argument("[pack] " + corpus.where(corpus.docs[d]) + " has " +
                                    std::to_string(len) + " tokens, more than seq_len " +
                                    std::to_string(S) + " (drop_long_samples: true drops it)");
      }
    }
    kept.push_back(static_cast<int64_t>(d));
    lengths.push_back(len);
  }

  std::vector<std::vector<int64_t>> bins;
  if (options.mode == Packing::bfd) {
    bins = fit_decreasing(lengths, S, FitRule::best);
  } else if (options.mode == Packing::padded) {
    for (size_t i = 0; i < lengths.size(); ++i) bins.push_back({static_cast<int64_t>(i)});
  } else {
    bins = fit_in_order(lengths, S);
  }
  if (options.max_packs > 0 && static_cast<int64_t>(bins.size()) > options.max_packs)
    bins.resize(options.max_packs);
  if (bins.empty())
    throw std::invalid_argument("[pack] nothing to pack: of " + std::to_string(corpus.docs.size()) +
                                " documents " + std::to_string(plan.empty) + " are empty and " +
                                std::to_string(plan.dropped_long) + " longer than seq_len " +
                                std::to_string(S));
  plan.rows.reserve(bins.size());
  for (const std::vector<int64_t>& bin : bins) {
    RowPlan& row = plan.rows.emplace_back();
    row.reserve(bin.size());
    for (int64_t item : bin) {
      row.push_back({kept[item], lengths[item]});
      plan.tokens += lengths[item];
    }
    plan.documents += static_cast<int64_t>(bin.size());
  }
  return plan;
}

}  // namespace sprig::data
