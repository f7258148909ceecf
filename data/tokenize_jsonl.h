// Tokenizing a JSONL file of text or chat records into documents records (docs/tokenizer.md §3):
//   {"text": "..."}                                  -> {"input_ids": [...]}
//   {"messages": [{"role": ..., "content": ...}]}     -> {"input_ids": [...], "loss_mask": [...]}
// the output being what data/readers.h reads as unshifted documents. Records are read in batches
// and tokenized on several threads; the output keeps the input's order.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "data/chat.h"
#include "data/readers.h"
#include "data/tokenizer.h"

namespace sprig::data {

enum class RecordFormat {
  any,   // each record by its key: "messages" is chat, "text" is text
  text,  // every record must hold "text"
  chat,  // every record must hold "messages"
};
RecordFormat record_format_from_name(const std::string& name);  // auto, text or chat

struct TokenizeCounts {
  int64_t records = 0, chats = 0, tokens = 0, supervised = 0;
};

struct TokenizeJob {
  const Tokenizer* tokenizer = nullptr;
  const ChatTemplate* chat = nullptr;  // null: a chat record is a bad record that says why
  RecordFormat format = RecordFormat::any;
  int threads = 0;  // 0: one per core
  bool skip_bad_records = false;
};

// Tokenizes every non-blank line of `path`, calling write(line) with each output record (one
// JSON object, no newline) in input order and progress(counts) after each batch. A bad record
// stops with "path:line: reason" (std::invalid_argument), or under skip_bad_records is counted in
// `bad` and left out.
TokenizeCounts tokenize_jsonl(const std::string& path, const TokenizeJob& job, BadRecords& bad,
                              const std::function<void(const std::string&)>& write,
                              const std::function<void(const TokenizeCounts&)>& progress);

}  // namespace sprig::data
