// Text and chat records to documents records, in batches on several threads
// (data/tokenize_jsonl.h).
#include "data/tokenize_jsonl.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <thread>

#include "tensor/input_file.h"
#include "tensor/json_text.h"

namespace sprig::data {

namespace {

using nlohmann::json;

constexpr size_t kBatchRecords = 2048;

void append_ints(std::string& out, const char* key, const std::vector<int32_t>& values) {
  out += '"';
  out += key;
  out += "\":[";
  char buffer[16];
  for (size_t i = 0; i < values.size(); ++i) {
    if (i) out += ',';
    const int n = std::snprintf(buffer, sizeof buffer, "%d", values[i]);
    out.append(buffer, static_cast<size_t>(n));
  }
  out += ']';
}

struct Result {
  std::string line;   // the output record, or
  std::string error;  // why the record is bad
  bool chat = false;
  int64_t tokens = 0, supervised = 0;
};

Result tokenize_record(const std::string& text, bool last_without_newline, const TokenizeJob& job) {
  Result r;
  json record;
  try {
    record = parse_json(text);
  } catch (const std::runtime_error& e) {
    r.error = last_without_newline ? "truncated last line (no newline at the end, not valid JSON)"
                                   : e.what();
    return r;
  }
  if (!record.is_object()) {
    r.error = std::string("expected a JSON object, got ") + record.type_name();
    return r;
  }
  const bool has_messages = record.contains("messages"), has_text = record.contains("text");
  r.chat = job.format == RecordFormat::chat || (job.format == RecordFormat::any && has_messages);
  try {
    if (r.chat) {
      if (!has_messages) throw std::invalid_argument("missing \"messages\" (--format chat)");
      if (job.chat == nullptr)
        throw std::invalid_argument(
            "a chat record needs the tokenizer's chat template (tokenizer_config.json)");
      const ChatTokens t =
          tokenize_chat(*job.tokenizer, *job.chat, parse_messages(record["messages"]));
      r.line = "{";
      append_ints(r.line, "input_ids", t.input_ids);
      r.line += ',';
      append_ints(r.line, "loss_mask", t.loss_mask);
      r.line += '}';
      r.tokens = static_cast<int64_t>(t.input_ids.size());
      r.supervised = std::count(t.loss_mask.begin(), t.loss_mask.end(), 1);
      return r;
    }
    if (!has_text)
      throw std::invalid_argument(job.format == RecordFormat::text
                                      ? "missing \"text\" (--format text)"
                                      : "a record needs \"text\" or \"messages\"");
    if (!record["text"].is_string())
      throw std::invalid_argument("\"text\" must be a string, got " +
                                  record["text"].dump().substr(0, 80));
    const std::vector<int32_t> ids = job.tokenizer->encode(record["text"].get<std::string>());
    r.line = "{";
    append_ints(r.line, "input_ids", ids);
    r.line += '}';
    r.tokens = r.supervised = static_cast<int64_t>(ids.size());
  } catch (const std::invalid_argument& e) {
    r.error = e.what();
  }
  return r;
}

// Runs fn(i) for i in [0, n) on up to `threads` threads.
template <class F> void parallel_for(size_t n, int threads, F fn) {
  const size_t workers = std::min<size_t>(static_cast<size_t>(threads), n);
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i; (i = next++) < n;) fn(i);
  };
  std::vector<std::thread> pool;
  for (size_t w = 1; w < workers; ++w) pool.emplace_back(work);
  work();
  for (std::thread& t : pool) t.join();
}

}  // namespace

RecordFormat record_format_from_name(const std::string& name) {
  if (name == "auto") return RecordFormat::any;
  if (name == "text") return RecordFormat::text;
  if (name == "chat") return RecordFormat::chat;
  throw std::invalid_argument("[data] unknown record format '" + name +
                              "' (expected auto, text or chat)");
}

TokenizeCounts tokenize_jsonl(const std::string& path, const TokenizeJob& job, BadRecords& bad,
                              const std::function<void(const std::string&)>& write,
                              const std::function<void(const TokenizeCounts&)>& progress) {
  check_input_file(path, "a JSONL file", "[data] ");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::invalid_argument("[data] cannot open " + path + ": " + std::strerror(errno));
  const int threads = job.threads > 0
                          ? job.threads
                          : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  TokenizeCounts counts;
  std::vector<std::string> lines;
  std::vector<int64_t> numbers;
  std::vector<Result> results;
  int64_t line_no = 0;
  bool truncated_last = false;
  while (in) {
    lines.clear();
    numbers.clear();
    for (std::string text; lines.size() < kBatchRecords && std::getline(in, text);) {
      ++line_no;
      if (text.find_first_not_of(" \t\r") == std::string::npos) continue;
      truncated_last = in.eof();
      lines.push_back(std::move(text));
      numbers.push_back(line_no);
    }
    if (lines.empty()) break;
    results.assign(lines.size(), Result());
    parallel_for(lines.size(), threads, [&](size_t i) {
      results[i] = tokenize_record(lines[i], truncated_last && i + 1 == lines.size(), job);
    });
    for (size_t i = 0; i < lines.size(); ++i) {
      const Result& r = results[i];
      if (!r.error.empty()) {
        const std::string message = path + ":" + std::to_string(numbers[i]) + ": " + r.error;
        if (!job.skip_bad_records) throw std::invalid_argument(message);
        bad.add(message);
        continue;
      }
      write(r.line);
      ++counts.records;
      counts.chats += r.chat;
      counts.tokens += r.tokens;
      counts.supervised += r.supervised;
    }
    progress(counts);
  }
  if (in.bad()) throw std::runtime_error("[data] error reading " + path);
  return counts;
}

}  // namespace sprig::data
