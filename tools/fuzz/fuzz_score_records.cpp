// libFuzzer target: the JSONL records of `sprig score` (tools/score_records.h). The first byte
// picks the vocabulary (64, or 1000 for bytes >= 128) and, by its lowest bit,
// --supervise-first-token; the rest is one record. A record that
// parses must give one row whose tensors agree in length, with every id in the vocabulary; bad
// ones must be rejected with an exception that says why.
#include <cstdint>
#include <cstdlib>

#include "tools/fuzz/fuzz_input.h"
#include "tools/score_records.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const int64_t vocab = data[0] >= 128 ? 1000 : 64;
  sprig::fuzz::expect_parse_or_reject([&] {
    const sprig::data::Batch b = sprig::tools::parse_score_record(
        nlohmann::json::parse(data + 1, data + size), vocab, "fuzz:1", (data[0] & 1) != 0);
    if (b.input_ids.shape().size() != 2 || b.input_ids.shape()[0] != 1 ||
        b.position_ids.shape() != b.input_ids.shape())
      std::abort();
    for (const int64_t id : b.input_ids.to_vector<int64_t>())
      if (id < 0 || id >= vocab) std::abort();
  });
  return 0;
}
