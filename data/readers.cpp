// Record readers: documents and rollouts JSONL (one JSON object per line), llm.c token shards.
#include "data/readers.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <utility>

#include "data/prefix_tree.h"
#include "tensor/input_file.h"
#include "tensor/json_text.h"
#include "tensor/names.h"

namespace sprig::data {

namespace {

using nlohmann::json;

constexpr const char* kFormatNames[] = {"documents", "rollouts", "shards"};
constexpr size_t kKeptMessages = 3;  // BadRecords keeps this many messages

std::ifstream open_file(const std::string& path, std::ios::openmode mode) {
  check_input_file(path, "a data file (JSONL or token shard)", "[data] ");
  std::ifstream in(path, mode);
  if (!in) throw std::invalid_argument("[data] cannot open " + path + ": " + std::strerror(errno));
  return in;
}

// Record-level failures are thrown as BadRecord(reason) and located by the caller.
struct BadRecord : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

std::string quoted(const std::string& key) { return "\"" + key + "\""; }

// The integers of JSON array `value` (named `name` in messages); booleans too when `allow_bool`.
std::vector<int32_t> to_ints(const json& value, const std::string& name, bool allow_bool = false) {
  if (!value.is_array()) throw BadRecord(name + " must be an array of integers");
  std::vector<int32_t> out;
  out.reserve(value.size());
  for (const json& v : value) {
    const std::string entry = name + "[" + std::to_string(out.size()) + "]";
    if (allow_bool && v.is_boolean()) {
      out.push_back(v.get<bool>() ? 1 : 0);
      continue;
    }
    if (!v.is_number_integer()) throw BadRecord(entry + " is not an integer: " + v.dump());
    // Compared in double, which holds every 32-bit integer exactly (read as int64_t, JSON's
    // unsigned integers past 2^63 would wrap to negative values).
    const double x = v.get<double>();
    if (x < std::numeric_limits<int32_t>::min() || x > std::numeric_limits<int32_t>::max())
      throw BadRecord(entry + " = " + v.dump() + " does not fit in 32 bits");
    out.push_back(v.get<int32_t>());
  }
  return out;
}

// The numbers of JSON array `value` (named `name` in messages).
std::vector<float> to_floats(const json& value, const std::string& name) {
  if (!value.is_array()) throw BadRecord(name + " must be an array of numbers");
  std::vector<float> out;
  out.reserve(value.size());
  for (const json& v : value) {
    if (!v.is_number())
      throw BadRecord(name + "[" + std::to_string(out.size()) + "] is not a number: " + v.dump());
    out.push_back(v.get<float>());
  }
  return out;
}

// Refuses a key the format does not have: a misspelt "lossmask" would leave every token
// supervised.
void check_keys(const json& record, const std::vector<std::string>& keys) {
  for (const auto& entry : record.items())
    if (const std::string why = unknown_record_key(entry.key(), keys); !why.empty())
      throw BadRecord(why);
}

const json& field(const json& record, const char* key) {
  auto it = record.find(key);
  if (it == record.end()) throw BadRecord("missing " + quoted(key));
  return *it;
}

void check_id(int64_t id, const std::string& entry, int64_t vocab_size) {
  if (id < 0 || (vocab_size > 0 && id >= vocab_size))
    throw BadRecord(entry + " = " + std::to_string(id) + " is not a token id " +
                    (vocab_size > 0 ? "in [0, " + std::to_string(vocab_size) + ")" : "(negative)"));
}

std::vector<int32_t> ids_field(const json& value, const std::string& name, int64_t vocab_size) {
  std::vector<int32_t> ids = to_ints(value, name);
  for (size_t i = 0; i < ids.size(); ++i)
    check_id(ids[i], name + "[" + std::to_string(i) + "]", vocab_size);
  return ids;
}

void check_same_length(const std::vector<int32_t>& v, const char* key, size_t n) {
  if (v.size() != n)
    throw BadRecord(quoted(key) + " has " + std::to_string(v.size()) + " entries but " +
                    quoted("input_ids") + " has " + std::to_string(n));
}

// input_ids[:-1] and labels[t] = input_ids[t+1] where supervised (loss_mask empty: everywhere).
void shift_to_labels(Document& doc) {
  if (doc.input_ids.empty()) return;
  const size_t n = doc.input_ids.size() - 1;
  doc.labels.resize(n);
  for (size_t t = 0; t < n; ++t)
    doc.labels[t] =
        doc.loss_mask.empty() || doc.loss_mask[t + 1] ? doc.input_ids[t + 1] : kIgnoreIndex;
  doc.input_ids.pop_back();
  doc.loss_mask.clear();
}

Document parse_document(const json& record, TargetForm form, int64_t vocab_size) {
  check_keys(record, {"input_ids", "loss_mask", "labels"});
  Document doc;
  doc.input_ids = ids_field(field(record, "input_ids"), quoted("input_ids"), vocab_size);
  const size_t n = doc.input_ids.size();
  if (record.contains("loss_mask")) {
    doc.loss_mask = to_ints(record["loss_mask"], quoted("loss_mask"), /*allow_bool=*/true);
    check_same_length(doc.loss_mask, "loss_mask", n);
    for (size_t i = 0; i < n; ++i)
      if (doc.loss_mask[i] != 0 && doc.loss_mask[i] != 1)
        throw BadRecord(quoted("loss_mask") + "[" + std::to_string(i) +
                        "] = " + std::to_string(doc.loss_mask[i]) + " is not 0 or 1");
  }
  if (!record.contains("labels")) {
    if (form == TargetForm::labels) shift_to_labels(doc);
    return doc;
  }
  if (form == TargetForm::loss_mask)
    throw BadRecord("dflash packing needs unshifted documents (" + quoted("input_ids") +
                    " with an optional " + quoted("loss_mask") + "), this record has " +
                    quoted("labels"));
  doc.labels = to_ints(record["labels"], quoted("labels"));
  check_same_length(doc.labels, "labels", n);
  for (size_t i = 0; i < n; ++i) {
    if (doc.labels[i] != kIgnoreIndex)
      check_id(doc.labels[i], quoted("labels") + "[" + std::to_string(i) + "]", vocab_size);
    if (!doc.loss_mask.empty() && doc.loss_mask[i] == 0) doc.labels[i] = kIgnoreIndex;
  }
  doc.loss_mask.clear();
  return doc;
}

Document parse_rollout(const json& record, const ReadOptions& options) {
  const int64_t vocab_size = options.vocab_size;
  check_keys(record, {"prompt_ids", "completions", "advantages", "old_logprobs"});
  RolloutGroup group;
  group.prompt_ids = ids_field(field(record, "prompt_ids"), quoted("prompt_ids"), vocab_size);
  const json& completions = field(record, "completions");
  if (!completions.is_array()) throw BadRecord(quoted("completions") + " must be an array");
  for (const json& c : completions)
    group.completions.push_back(
        ids_field(c, quoted("completions") + "[" + std::to_string(group.completions.size()) + "]",
                  vocab_size));
  if (record.contains("advantages"))
    group.advantages = to_floats(record["advantages"], quoted("advantages"));
  if (record.contains("old_logprobs")) {
    const json& old = record["old_logprobs"];
    if (!old.is_array())
      throw BadRecord(quoted("old_logprobs") + " must be an array (one list per completion)");
    for (const json& lp : old)
      group.old_logprobs.push_back(to_floats(
          lp, quoted("old_logprobs") + "[" + std::to_string(group.old_logprobs.size()) + "]"));
  }
  if (options.supervise_first_token) check_first_tokens_predictable(group);
  return fold(group);
}

void report(const std::string& location, const std::string& reason, const ReadOptions& options,
            BadRecords& bad) {
  const std::string message = location + ": " + reason;
  if (!options.skip_bad_records) throw std::invalid_argument(message);
  bad.add(message);
}

// Calls `parse` on every non-blank line of a JSONL file and hands its document (record = line
// number) to the sink.
void read_jsonl(const std::string& path, const ReadOptions& options, BadRecords& bad,
                const DocumentSink& sink, const std::function<Document(const json&)>& parse) {
  std::ifstream in = open_file(path, std::ios::in);
  std::string text;
  for (int64_t line = 1; std::getline(in, text); ++line) {
    if (text.find_first_not_of(" \t\r") == std::string::npos) continue;
    const bool last_without_newline = in.eof();
    Document doc;
    try {
      json record;
      try {
        record = parse_json(text);
      } catch (const std::runtime_error& e) {  // malformed, a key twice, a NUL byte, a number
                                               // beyond double's range
        throw BadRecord(last_without_newline
                            ? "truncated last line (no newline at the end, not valid JSON)"
                            : e.what());
      }
      if (!record.is_object())
        throw BadRecord(std::string("expected a JSON object, got ") + record.type_name());
      doc = parse(record);
    } catch (const std::invalid_argument& e) {  // BadRecord, or fold's checks
      report(path + ":" + std::to_string(line), e.what(), options, bad);
      continue;
    }
    doc.record = line;
    sink(std::move(doc));
  }
  if (in.bad()) throw std::invalid_argument("[data] error reading " + path);
}

// Checks an llm.c shard header; returns the bytes per token and the token count.
std::pair<size_t, int64_t> read_shard_header(std::ifstream& in, const std::string& path) {
  constexpr int32_t kMagic = 20240520;
  constexpr size_t kHeaderInts = 256, kHeaderBytes = kHeaderInts * sizeof(int32_t);
  const uintmax_t file_bytes = std::filesystem::file_size(path);
  int32_t header[kHeaderInts] = {};
  if (file_bytes < kHeaderBytes || !in.read(reinterpret_cast<char*>(header), kHeaderBytes))
    throw std::invalid_argument(path + ": not a token shard (" + std::to_string(file_bytes) +
                                " bytes, shorter than the 1024-byte header)");
  if (header[0] != kMagic)
    throw std::invalid_argument(path + ": not a token shard (magic " + std::to_string(header[0]) +
                                ", expected 20240520)");
  if (header[1] != 1 && header[1] != 2)
    throw std::invalid_argument(path + ": unsupported token shard version " +
                                std::to_string(header[1]) +
                                " (1 = uint16 tokens, 2 = uint32 tokens)");
  const size_t width = header[1] == 1 ? 2 : 4;
  const int64_t count = header[2];
  if (count < 0 || file_bytes != kHeaderBytes + static_cast<uintmax_t>(count) * width)
    throw std::invalid_argument(
        path + ": truncated token shard: the header promises " + std::to_string(count) +
        " tokens (" + std::to_string(kHeaderBytes + count * width) + " bytes) but the file holds " +
        std::to_string(file_bytes) + " bytes");
  return {width, count};
}

}  // namespace

DataFormat format_from_name(const std::string& name) {
  for (size_t i = 0; i < std::size(kFormatNames); ++i)
    if (name == kFormatNames[i]) return static_cast<DataFormat>(i);
  throw std::invalid_argument("[data] unknown format '" + name +
                              "' (expected documents, rollouts or shards)");
}

const char* format_name(DataFormat format) { return kFormatNames[static_cast<int>(format)]; }

void check_format_packing(DataFormat format, Packing packing) {
  if ((format == DataFormat::rollouts) != (packing == Packing::fold))
    throw std::invalid_argument(
        std::string("[data] format ") + format_name(format) + " cannot use packing " +
        packing_name(packing) +
        " (rollouts use fold; documents and shards dflash, padded, sft or bfd)");
}

void BadRecords::add(const std::string& message) {
  ++count;
  if (first.size() < kKeptMessages) first.push_back(message);
}

std::string BadRecords::summary() const {
  if (count == 0) return "";
  std::string s = "skipped " + std::to_string(count) + " bad record" + (count > 1 ? "s" : "");
  for (size_t i = 0; i < first.size(); ++i) s += (i ? "; " : " (") + first[i];
  return s + (count > static_cast<int64_t>(first.size()) ? "; ...)" : ")");
}

void read_documents(const std::string& path, TargetForm form, const ReadOptions& options,
                    BadRecords& bad, const DocumentSink& sink) {
  read_jsonl(path, options, bad, sink,
             [&](const json& record) { return parse_document(record, form, options.vocab_size); });
}

void read_rollouts(const std::string& path, const ReadOptions& options, BadRecords& bad,
                   const DocumentSink& sink) {
  read_jsonl(path, options, bad, sink,
             [&](const json& record) { return parse_rollout(record, options); });
}

void read_shard(const std::string& path, TargetForm form, const ReadOptions& options,
                BadRecords& bad, const DocumentSink& sink) {
  if (options.eot_id < 0) throw std::invalid_argument("[data] token shards need eot_id");
  std::ifstream in = open_file(path, std::ios::binary);
  const auto [width, count] = read_shard_header(in, path);

  Document doc;
  std::string problem;  // why the current document is bad, if it is
  int64_t record = 0;
  auto finish = [&] {  // the current document is complete: hand it over (or report it)
    if (!problem.empty()) {
      report(path + " document " + std::to_string(record), problem, options, bad);
    } else {
      if (form == TargetForm::labels) shift_to_labels(doc);
      doc.record = record;
      sink(std::move(doc));
    }
    ++record;
    doc = Document();
    problem.clear();
  };
  std::vector<char> chunk;
  for (int64_t done = 0; done < count;) {
    const int64_t n = std::min<int64_t>(count - done, int64_t{1} << 20);
    chunk.resize(n * width);
    if (!in.read(chunk.data(), static_cast<std::streamsize>(chunk.size())))
      throw std::invalid_argument("[data] error reading " + path);
    for (int64_t i = 0; i < n; ++i) {
      uint32_t id = 0;
      if (width == 2) {
        uint16_t v;
        std::memcpy(&v, chunk.data() + i * 2, 2);
        id = v;
      } else {
        std::memcpy(&id, chunk.data() + i * 4, 4);
      }
      if (problem.empty() &&
          (id > INT32_MAX || (options.vocab_size > 0 && id >= options.vocab_size)))
        problem = "token " + std::to_string(done + i) + " (id " + std::to_string(id) +
                  ") is not a token id in [0, " +
                  (options.vocab_size > 0 ? std::to_string(options.vocab_size) : "2^31") + ")";
      if (static_cast<int64_t>(id) != options.eot_id) {
        doc.input_ids.push_back(static_cast<int32_t>(id));
      } else if (!doc.input_ids.empty()) {  // a leading or repeated end-of-text id closes nothing
        doc.input_ids.push_back(static_cast<int32_t>(id));
        finish();
      }
    }
    done += n;
  }
  if (!doc.input_ids.empty()) finish();  // the last document may lack an end-of-text id
}

Corpus load_corpus(const std::vector<std::string>& paths, DataFormat format, Packing packing,
                   const ReadOptions& options, BadRecords& bad) {
  check_format_packing(format, packing);
  Corpus corpus;
  corpus.form = target_form(packing);
  corpus.folded = format == DataFormat::rollouts;
  corpus.line_numbered = format != DataFormat::shards;
  for (const std::string& path : paths) {
    const int32_t source = static_cast<int32_t>(corpus.sources.size());
    corpus.sources.push_back(path);
    const DocumentSink sink = [&](Document&& doc) {
      doc.source = source;
      corpus.docs.push_back(std::move(doc));
    };
    switch (format) {
      case DataFormat::documents: read_documents(path, corpus.form, options, bad, sink); break;
      case DataFormat::rollouts: read_rollouts(path, options, bad, sink); break;
      case DataFormat::shards: read_shard(path, corpus.form, options, bad, sink); break;
    }
  }
  return corpus;
}

}  // namespace sprig::data
