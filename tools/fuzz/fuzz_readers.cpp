// libFuzzer target: the record readers (data/readers.h) on arbitrary file contents. The first
// byte picks the reader and its options (bits 0-1: documents in the loss_mask form, documents in
// the labels form, rollouts, a token shard; bit 2: skip_bad_records; bit 3: vocab_size 1000), the
// rest is the file. Every document handed over must be consistent with its form; bad files must
// be rejected with an exception that says why.
#include <cstdint>
#include <cstdlib>

#include "data/readers.h"
#include "tools/fuzz/fuzz_input.h"

namespace {

using namespace sprig::data;

void check_document(const Document& doc, TargetForm form, const ReadOptions& options) {
  const size_t n = doc.input_ids.size();
  if (form == TargetForm::labels && doc.labels.size() != n) std::abort();
  if (form == TargetForm::loss_mask && !doc.loss_mask.empty() && doc.loss_mask.size() != n)
    std::abort();
  const auto is_id = [&](int32_t id) {
    return id >= 0 && (options.vocab_size == 0 || id < options.vocab_size);
  };
  for (int32_t id : doc.input_ids)
    if (!is_id(id)) std::abort();
  for (int32_t label : doc.labels)
    if (label != kIgnoreIndex && !is_id(label)) std::abort();
  int64_t folded = 0;
  for (int32_t len : doc.node_lengths) folded += len;
  if (!doc.node_lengths.empty() && folded != static_cast<int64_t>(n)) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t mode = data[0];
  const std::string& path = sprig::fuzz::scratch_file(data + 1, size - 1, ".records");
  ReadOptions options;
  options.skip_bad_records = mode & 4;
  options.vocab_size = mode & 8 ? 1000 : 0;
  options.eot_id = 0;
  BadRecords bad;
  const int reader = mode & 3;
  const TargetForm form = reader == 0 ? TargetForm::loss_mask : TargetForm::labels;
  const DocumentSink sink = [&](Document&& doc) { check_document(doc, form, options); };
  sprig::fuzz::expect_parse_or_reject([&] {
    switch (reader) {
      case 0:
      case 1: read_documents(path, form, options, bad, sink); break;
      case 2: read_rollouts(path, options, bad, sink); break;
      default: read_shard(path, form, options, bad, sink); break;
    }
  });
  if (!options.skip_bad_records && bad.count != 0) std::abort();
  return 0;
}
