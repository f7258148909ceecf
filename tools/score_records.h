// The JSONL records `sprig score` reads, one per line, each as a one-row batch without padding
// (data/batch.h): {"input_ids"}: one causal sequence. {"documents"}: one packed row, each
// document causal with its own positions. {"prompt_ids", "completions"}: the folded prefix-tree
// layout of docs/semantics.md §1. Any other key, several layouts, or an id outside the
// vocabulary is refused with std::runtime_error "<where>: <what is wrong>".
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "data/batch.h"

namespace sprig::tools {

// One record of `sprig score` as a batch of one row; `supervise_first_token`: a rollout group
// needs a prompt (data::check_first_tokens_predictable). Throws std::runtime_error prefixed by
// `where` (file:line).
data::Batch parse_score_record(const nlohmann::json& record, int64_t vocab_size,
                               const std::string& where, bool supervise_first_token);

}  // namespace sprig::tools
