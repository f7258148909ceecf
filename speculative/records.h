// The records `sprig eval dflash` reads, one micro-batch of one row per JSONL line:
//   {"input_ids": [...], "loss_mask": [...]}                       one sequence
//   {"documents": [{"input_ids": [...], "loss_mask": [...]}, ...]}  one packed row, the documents
//                                                                   back to back, no padding
// loss_mask is optional (all ones). Either form may fix its blocks instead of sampling them:
// "anchors" (row positions), "keep" (bools, as many; default all true) and, for the
// variable-prefix loss, "prefix_lengths" (as many, each in [1, block_size - 1]);
// docs/semantics.md §9.8.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "speculative/blocks.h"

namespace sprig::speculative {

struct DraftRecord {
  DraftRows rows;                  // one row
  std::optional<Anchors> anchors;  // when the record gives them
  Tensor prefix_lengths;           // (1, N) i64 when the record gives them
};

// Parses and checks one record against the vocabulary and the block size; a key not listed above
// is refused with the closest known one. Throws
// std::runtime_error "<where>: <reason>" (where is file:line).
DraftRecord parse_draft_record(const nlohmann::json& record, int64_t vocab_size, int64_t block_size,
                               const std::string& where);

}  // namespace sprig::speculative
