// Record readers. Each streams one file and hands over documents one at a time:
//   documents JSONL  {"input_ids": [...], "loss_mask": [...]}  unshifted; no loss_mask = all ones
//                    {"input_ids": [...], "labels": [...]}     pre-shifted (an optional loss_mask
//                                                              then sets labels to -100 where 0)
//   rollouts JSONL   {"prompt_ids": [...], "completions": [[...], ...]}  folded on reading;
//                    optionally "advantages": [one per completion] and "old_logprobs": [[one per
//                    completion token], ...] for policy-gradient training
//   token shards     llm.c .bin: 256 int32 header (magic 20240520, version 1 = uint16 tokens or
//                    2 = uint32, token count), then the tokens; documents are the runs between
//                    end-of-text ids, each keeping the end-of-text id that closes it
// A bad record (malformed JSON, missing field, a key the format does not have, length mismatch,
// empty completion, id outside [0, vocab_size), truncated last line) stops reading with
// "file:line: reason", or is skipped and counted under skip_bad_records.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "data/document.h"
#include "data/packing.h"

namespace sprig::data {

enum class DataFormat { documents, rollouts, shards };
DataFormat format_from_name(const std::string& name);  // throws on an unknown name
const char* format_name(DataFormat format);
// Throws unless the packing applies to the format (rollouts are folded, nothing else is).
void check_format_packing(DataFormat format, Packing packing);

struct ReadOptions {
  int64_t vocab_size = 0;         // > 0: every token id must lie in [0, vocab_size)
  int64_t eot_id = -1;            // token shards: the end-of-text id between documents
  bool skip_bad_records = false;  // skip and count bad records instead of stopping
  // Rollouts: every group must have a prompt to predict its completions' first tokens from.
  bool supervise_first_token = false;
};

// Bad records skipped under skip_bad_records: how many, and the first few messages.
struct BadRecords {
  int64_t count = 0;
  std::vector<std::string> first;

  void add(const std::string& message);
  std::string summary() const;  // empty when none were skipped
};

using DocumentSink = std::function<void(Document&&)>;

// Documents JSONL in the given target form: unshifted records are shifted for the labels form
// (input_ids[:-1], labels[t] = input_ids[t+1] where loss_mask[t+1] is 1); pre-shifted records
// cannot give the loss_mask form and are bad records there.
void read_documents(const std::string& path, TargetForm form, const ReadOptions& options,
                    BadRecords& bad, const DocumentSink& sink);
// Rollouts JSONL, each group folded (data/prefix_tree.h).
void read_rollouts(const std::string& path, const ReadOptions& options, BadRecords& bad,
                   const DocumentSink& sink);
// A token shard; every token is supervised (shifted like a JSONL document for the labels form).
void read_shard(const std::string& path, TargetForm form, const ReadOptions& options,
                BadRecords& bad, const DocumentSink& sink);

// Every document of `paths` (in order) in the form `packing` needs.
Corpus load_corpus(const std::vector<std::string>& paths, DataFormat format, Packing packing,
                   const ReadOptions& options, BadRecords& bad);

}  // namespace sprig::data
