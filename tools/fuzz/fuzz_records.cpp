// libFuzzer target: the JSONL records of `sprig eval` (speculative/records.h,
// parse_draft_record). The first byte picks the block size (2 + byte % 16) and the vocabulary
// (64, or 1000 for bytes >= 128), the rest is one record. A record that parses must give one row
// whose tensors agree in length; bad ones must be rejected with an exception that says why.
#include <cstdint>
#include <cstdlib>

#include "speculative/records.h"
#include "tools/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const int64_t block_size = 2 + data[0] % 16, vocab = data[0] >= 128 ? 1000 : 64;
  sprig::fuzz::expect_parse_or_reject([&] {
    const sprig::speculative::DraftRecord r = sprig::speculative::parse_draft_record(
        nlohmann::json::parse(data + 1, data + size), vocab, block_size, "fuzz:1");
    if (r.rows.input_ids.shape() != r.rows.loss_mask.shape() || r.rows.input_ids.shape()[0] != 1)
      std::abort();
  });
  return 0;
}
