// libFuzzer target: the tokenizer (data/tokenizer.h) on arbitrary bytes. An input starting with
// '{' is a tokenizer.json: it must load or be rejected with a message, and a loaded tokenizer must
// encode and decode a fixed text. Any other input is text for the golden tokenizer of
// tests/golden/tokenizer: its ids must lie in the vocabulary, the batch encoder must agree with
// encode, and decode(encode(x)) must give x repaired and NFC-normalised (HF's text), unless an
// added token that strips the whitespace beside it (<|mask|>) matched.
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>

#include "data/tokenizer.h"
#include "data/unicode_text.h"
#include "tools/fuzz/fuzz_input.h"

namespace {

using sprig::data::Tokenizer;

void check_ids(const Tokenizer& tokenizer, const std::vector<int32_t>& ids) {
  for (int32_t id : ids)
    if (id < 0 || id >= tokenizer.vocab_size()) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  if (!input.empty() && input[0] == '{') {
    std::optional<Tokenizer> loaded;
    sprig::fuzz::expect_parse_or_reject(
        [&] { loaded.emplace(Tokenizer::from_json(input, "fuzz.json")); });
    if (loaded) {
      const std::vector<int32_t> ids = loaded->encode("Hello wörld 123 \xF0\x9F\x91\x8D\n\t x");
      check_ids(*loaded, ids);
      (void)loaded->decode(ids);
    }
    return 0;
  }
  static const Tokenizer golden =
      Tokenizer::load(std::string(SPRIG_SOURCE_DIR) + "/tests/golden/tokenizer");
  const std::vector<int32_t> ids = golden.encode(input);
  check_ids(golden, ids);
  if (golden.encode_batch({input, input}, 2) != std::vector<std::vector<int32_t>>{ids, ids})
    std::abort();
  const std::string text = sprig::data::repair_utf8(input);
  if (text.find("<|mask|>") == std::string::npos && golden.decode(ids) != sprig::data::nfc(text))
    std::abort();
  return 0;
}
