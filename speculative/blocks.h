// The blocks of a block-parallel draft (docs/semantics.md §8): anchor sampling, the block inputs
// (slot 0 the anchor's token, the other slots the mask token, or a visible prefix for the
// variable-prefix loss), the draft's positions, the block attention mask, and the block targets.
// Everything here is host bookkeeping on int64 tensors of one micro-batch; the draft's compute
// happens in speculative/draft.h and speculative/objective.h.
//
// Shape legend: B rows, S tokens per row (the context), N blocks per row, bs slots per block,
// Q = N * bs draft queries.
#pragma once

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "attention/attention_mask.h"
#include "tensor/random.h"
#include "tensor/tensor.h"

namespace sprig::speculative {

// A block holds its anchor and at least one slot to draft: the one rule on a block size, which
// the block layout, a draft's config and the training config apply.
constexpr int64_t kMinBlockSize = 2;

// A micro-batch as the draft trainers read it: unshifted tokens and their loss mask, and for
// packed rows (several documents per row) the per-document positions, the tokens left in each
// token's document and the document lengths of every row. Unpacked rows hold one sequence each
// (padding at the end), with positions 0..S-1.
struct DraftRows {
  Tensor input_ids;  // (B, S) i64
  Tensor loss_mask;  // (B, S) i64, 1 where the token is supervised
  // Packed rows only; undefined / empty otherwise.
  Tensor position_ids;   // (B, S) i64, restarting per document
  Tensor doc_remaining;  // (B, S) i64, real tokens after each one in its document
  std::vector<std::vector<int64_t>> doc_lens;  // per row, summing to S (padding in the last)

  bool packed() const { return !doc_lens.empty(); }
  int64_t rows() const { return input_ids.size(0); }
  int64_t seq_len() const { return input_ids.size(1); }
  // Throws "[draft] ..." on mismatched shapes or partial packing metadata.
  void check() const;
};

// What anchor sampling finds when no row of a micro-batch has a valid anchor: the micro-batch has
// nothing to train on (the trainer skips and counts it).
class NoValidAnchors : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

struct Anchors {
  Tensor anchors;  // (B, N) i64, ascending in each row's kept prefix, 0 where not kept
  Tensor keep;     // (B, N) bool, a kept prefix per row
  int64_t blocks() const { return anchors.size(1); }
};

// Valid anchors of row b: supervised positions t <= max(S - bs, 0), whose whole block stays in
// the document when packed (doc_remaining[t] >= bs - 1). N = min(num_anchors, the most valid
// positions of any row); each row keeps a uniform random subset of min(its count, N) of them,
// sorted (docs/semantics.md §8.1). Throws NoValidAnchors when no row has one.
Anchors sample_anchors(const DraftRows& rows, int64_t block_size, int64_t num_anchors,
                       Generator& gen);

// Given anchors (e.g. from a record) checked against the rows: shapes, range [0, max(S - bs, 0)],
// ascending within each row's kept prefix, keep a prefix. Throws "[anchors] ...".
void check_anchors(const DraftRows& rows, const Anchors& anchors, int64_t block_size);

struct BlockOptions {
  int64_t block_size = 16;
  int64_t mask_token_id = 0;
  bool causal = false;                  // in-block causal attention (JetSpec)
  int64_t sliding_window = 0;           // 0: none
  int64_t label_start = 0;              // slot k predicts the token at anchor + label_start + k
  bool labels_within_document = false;  // also cut labels at the anchor's document end
};

struct Blocks {
  int64_t block_size = 0;
  Tensor noise_ids;  // (B, Q) i64: the ids the draft embeds for its slots
  Tensor positions;  // (B, S + Q) i64: the context's positions, then the slots'
  std::shared_ptr<const AttentionMask> mask;  // [Q, S + Q], one per row
  Tensor target_ids;                          // (B, N, bs) i64
  Tensor block_mask;                          // (B, N, bs) f32: 1 where slot k is supervised
};

// The blocks of `anchors` over `rows` (docs/semantics.md §8.2-8.5). `prefix_lengths` (B, N) i64,
// when given, shows the first l tokens of each kept block (variable prefix; slot k shows the real
// token iff k < l and anchor + k < S); otherwise slot 0 shows the anchor's token.
Blocks make_blocks(const DraftRows& rows, const Anchors& anchors, const BlockOptions& options,
                   const Tensor& prefix_lengths = {});

// Prefix lengths of the variable-prefix loss: l in [min(2, bs - 1), bs - 1] with probability
// proportional to base^l, one draw per block (all min(2, bs - 1) when that range is one value).
Tensor sample_prefix_lengths(int64_t rows, int64_t blocks, int64_t block_size, double base,
                             Generator& gen);

}  // namespace sprig::speculative
