// Attention masks as lists of rectangles (docs/architecture.md §4): the one description every
// layout of sprig compiles from (causal, packed documents, prefix trees of any depth, DFlash
// blocks, sliding windows), its builders (docs/semantics.md §2) with argument checks, and its dense
// realisation.
//
// allowed(q, k) = OR over rectangles of: q in [q0, q1) AND k in [k0, k1) AND the rectangle's
// own condition (causal and/or window, see Rect). A query row no rectangle allows is fully masked:
// attention gives it output 0, lse = -inf and zero gradients.
#pragma once

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "tensor/tensor.h"

namespace sprig {

enum class RectKind : uint8_t { full, causal };
const char* rect_kind_name(RectKind kind);  // "full", "causal"

// Queries [q0, q1) x keys [k0, k1) (half-open, global indices).
// - causal: top-left aligned on the rectangle itself, allowed iff k - k0 <= q - q0 (for the
//   square rectangles of every builder this is k <= q, docs/semantics.md §2.1).
// - window > 0 (a sliding window, lower edge only): query row q sits at key position
//   p(q) = k0 + band_shift + (q - q0) and sees only keys with p(q) - k < window.
struct Rect {
  int64_t q0 = 0, q1 = 0, k0 = 0, k1 = 0;
  RectKind kind = RectKind::full;
  int64_t window = 0;      // 0: no window
  int64_t band_shift = 0;  // query row q0 sits at key position k0 + band_shift

  // The half-open key span [lo, hi) allowed on query row q (q in [q0, q1)); empty when lo >= hi.
  std::pair<int64_t, int64_t> key_span(int64_t q) const;
  bool operator==(const Rect&) const = default;
};

// One batch row's mask over q_len queries and k_len keys.
struct Mask {
  int64_t q_len = 0, k_len = 0;
  std::vector<Rect> rects;

  bool allowed(int64_t q, int64_t k) const;
  Tensor dense() const;  // bool [q_len, k_len]
  // Throws "[mask] ..." if a rectangle is malformed or leaves [0, q_len) x [0, k_len).
  void validate() const;
};

// The masks of a batch: one per row, or a single mask shared by every row. All have one shape.
class BatchMask {
 public:
  explicit BatchMask(Mask shared) : BatchMask(std::vector<Mask>{std::move(shared)}) {}
  explicit BatchMask(std::vector<Mask> rows);  // validates every mask and the common shape

  int64_t q_len() const { return rows_[0].q_len; }
  int64_t k_len() const { return rows_[0].k_len; }
  int64_t num_rows() const { return static_cast<int64_t>(rows_.size()); }  // 1 when shared
  // The mask of batch row b (the shared mask for every b when num_rows() == 1).
  const Mask& row(int64_t b) const { return rows_[rows_.size() == 1 ? 0 : b]; }

 private:
  std::vector<Mask> rows_;
};

// ---- builders -------------------------------------------------------------------------------
// Each throws std::invalid_argument "[builder] ..." on bad arguments. `window` > 0 adds a sliding
// window (each query sees its `window` most recent keys); 0 means none.

// One causal square [0, length)^2.
Mask causal_mask(int64_t length, int64_t window = 0);

// Packed documents: one causal square per document (docs/semantics.md §2.4). Zero-length entries
// never split a document. When `length` exceeds the sum, the trailing padding is folded into the
// last document (docs/semantics.md §4.5); a sum above `length` is an error.
Mask document_mask(const std::vector<int64_t>& seq_lens, std::optional<int64_t> length = {},
                   int64_t window = 0);

// Prefix tree (docs/semantics.md §2.5): node u occupies [offset[u], offset[u] + node_lengths[u]);
// along each path, in path order, every node emits (u, u, causal) then (u, a, full) for each
// earlier node a of the path; repeats of an emitted rectangle are skipped (first-emission order is
// kept).
Mask prefix_tree_mask(const std::vector<int64_t>& node_lengths,
                      const std::vector<std::vector<int64_t>>& sample_paths);

// EAGLE-3's training-time test at step `step` (docs/semantics.md §2.10): the queries are the
// `length` positions of that step, the keys those of steps 0..step side by side ([step 0 | step 1 |
// ... | step `step`], each `length` wide). A position sees the step-0 keys causally within its
// document (as document_mask(seq_lens, length)) and its own key of each later step, one diagonal
// rectangle (causal with a window of 1) per step.
Mask ttt_mask(const std::vector<int64_t>& seq_lens, int64_t length, int64_t step);

// Places masks side by side on the diagonal: part i's queries and keys are offset by the
// q_len / k_len of the parts before it (e.g. several prefix trees packed in one batch row).
Mask block_diagonal(const std::vector<Mask>& parts);

// DFlash block mask (docs/semantics.md §2.7). Queries are the N * block_size slots of N blocks,
// keys are [context (ctx_len) | slots]. Slot (j, i) sees, when keep[j], the context strictly before
// its anchor a_j (only a_j's document when seq_lens is given; only keys with (a_j + i) - k < window
// when a window is set), and always the slots of its own block (all of them, or offsets <= i when
// causal, as JetSpec).
struct DFlashMaskSpec {
  int64_t ctx_len = 0;           // S
  int64_t block_size = 0;        // bs >= 1
  std::vector<int64_t> anchors;  // N anchors, each in [0, max(S - bs, 0)]
  std::vector<bool> keep;        // N flags; a dropped block keeps only its own slots
  bool causal = false;
  std::vector<int64_t> seq_lens;  // document lengths summing to S; empty: no documents
  int64_t sliding_window = 0;     // 0: none
};
Mask dflash_mask(const DFlashMaskSpec& spec);

}  // namespace sprig
