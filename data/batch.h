// Batch: what one micro-batch hands the model — int64 token tensors plus layout metadata (document
// lengths per row, prefix trees with their offsets). The data layer never builds attention masks:
// the attention library builds them from this metadata.
#pragma once

#include <cstdint>
#include <vector>

#include "data/document.h"
#include "data/packing.h"
#include "tensor/tensor.h"

namespace sprig::data {

// One folded rollout group inside a batch row; several groups may share a row.
struct TreeGroup {
  int64_t row = 0;
  int64_t offset = 0;                              // index of the group's first token in its row
  std::vector<int64_t> node_lengths;               // [P, C_0, ..., C_{N-1}]
  std::vector<std::vector<int64_t>> sample_paths;  // root-to-leaf node indices
};

// B rows of S tokens; every tensor is int64 (B, S) unless noted. Undefined tensors do not apply
// to the packing: loss_mask, attention_mask and doc_remaining are dflash's; labels the others'.
struct Batch {
  Tensor input_ids;       // padding: pad_id
  Tensor labels;          // pre-shifted, kIgnoreIndex where unsupervised and on padding
  Tensor loss_mask;       // unshifted 0/1, 0 on padding
  Tensor attention_mask;  // 1 on real tokens, 0 on padding
  Tensor position_ids;    // restart per document (per tree: docs/semantics.md §1.2); padding
                          // continues the last document's positions, capped at S - 1
  Tensor doc_remaining;   // real tokens after each slot in its document, 0 on padding
  Tensor seq_lens;        // (B, max_docs) documents in row order, padding folded into the last
                          // one (each row sums to S), zero-filled on the right
  Tensor advantages;      // f32, per token (Document::advantages), 0 on the prompt and padding;
                          // defined when the batch's documents carry them
  Tensor old_logprobs;    // f32, per token (Document::old_logprobs), likewise
  std::vector<int64_t> num_pad;   // trailing padding tokens per row
  std::vector<TreeGroup> groups;  // fold packing: every group, row by row

  int64_t rows() const { return input_ids.size(0); }
  int64_t seq_len() const { return input_ids.size(1); }
  int64_t num_tokens() const;  // real (non-padding) tokens
};

// The batch made of rows `row_ids` of `plan` (documents from `corpus`), padded with `pad_id`.
Batch collate(const Corpus& corpus, const PackPlan& plan, const std::vector<int64_t>& row_ids,
              int64_t pad_id);

// The supervised next-token predictions of a labels-form batch (docs/semantics.md §1.7), ordered
// by predicting position: every labelled position t, predicting the token at t + 1; and with
// `first_token`, for every folded group with a prompt, its last prompt position once per
// completion, predicting that completion's first token (the N targets of one position).
struct ScoredTokens {
  std::vector<int64_t> rows;       // flat index b * S + t of the predicting position, ascending
  std::vector<int64_t> targets;    // the token predicted
  std::vector<int64_t> positions;  // flat index of the token predicted (its advantage, old logp)
  std::vector<int64_t> sequences;  // the completion (folded batches) or document predicted in,
                                   // numbered in row order from 0
  int64_t num_sequences = 0;       // completions or documents of the batch

  int64_t size() const { return static_cast<int64_t>(rows.size()); }
};
ScoredTokens scored_tokens(const Batch& batch, bool first_token);

// Document index of every token from (B, max_docs) seq_lens: doc[b, t] = #{j : cumsum_j <= t}, so
// zero-length entries never split a document (docs/semantics.md §4.8). Returns (B, S) int64.
Tensor context_doc_ids(const Tensor& seq_lens, int64_t seq_len);

}  // namespace sprig::data
