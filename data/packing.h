// Packers: which documents go into which row of S tokens. A plan lists, per row, the documents
// (and how many of their tokens) in row order; data/batch.h turns rows of a plan into tensors.
//   dflash  in-order greedy, longer documents truncated to S           (docs/semantics.md §4.5)
//   sft     in-order greedy, longer documents dropped or an error      (docs/semantics.md §4.3)
//   bfd     best-fit decreasing, at least as tight as the reference's knapsack (docs/semantics.md
//   §4.2); rows laid out as sft's
//           (long documents likewise)
//   fold    in-order greedy over folded rollout groups (several trees per row; long groups as sft)
//   padded  one document per row, longer documents truncated to S: dflash's rows unpacked
//           (docs/semantics.md §4.5)
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/document.h"

namespace sprig::data {

enum class Packing { dflash, sft, bfd, fold, padded };
Packing packing_from_name(const std::string& name);  // throws on an unknown name
const char* packing_name(Packing packing);
TargetForm target_form(Packing packing);  // loss_mask for dflash and padded, labels otherwise

// Bins of item indices (each bin in insertion order, bins in creation order). Every length must
// be in [1, capacity].
// In order: a bin is closed as soon as the next item does not fit (sequential first fit).
std::vector<std::vector<int64_t>> fit_in_order(const std::vector<int64_t>& lengths,
                                               int64_t capacity);
// Decreasing: items by length, longest first (ties keep input order), each into the open bin
// chosen by `rule` among those it fits, else into a new bin. FitRule::worst (least-filled bin,
// ties to the lower index) is the reference's greedy_knapsack (docs/semantics.md §4.2);
// FitRule::best (fullest bin that fits, ties to the lower index) packs tighter.
enum class FitRule { worst, best };
std::vector<std::vector<int64_t>> fit_decreasing(const std::vector<int64_t>& lengths,
                                                 int64_t capacity, FitRule rule);

// `length` leading tokens of document `doc` (all of it unless dflash or padded truncated it).
struct Segment {
  int64_t doc = 0;
  int64_t length = 0;
};
using RowPlan = std::vector<Segment>;

struct PackOptions {
  Packing mode = Packing::sft;
  int64_t seq_len = 0;
  bool drop_long_samples = true;  // sft, bfd, fold: drop documents longer than S (else an error)
  int64_t max_packs = 0;          // keep only the first max_packs rows (0: all)
};

struct PackPlan {
  int64_t seq_len = 0;
  std::vector<RowPlan> rows;
  int64_t documents = 0;  // documents placed
  int64_t tokens = 0;     // real tokens placed
  int64_t truncated = 0, dropped_long = 0, empty = 0;

  double padding_fraction() const;
  std::string summary() const;  // "120 documents in 8 rows of 4096 tokens, padding 1.25%, ..."
};

// Packs every document of `corpus`; mode must suit the corpus (dflash, padded: loss_mask form;
// fold: folded rollouts). Empty documents are skipped. Throws std::invalid_argument when a document
// is too long and may not be dropped, and when no row results.
PackPlan plan_rows(const Corpus& corpus, const PackOptions& options);

}  // namespace sprig::data
