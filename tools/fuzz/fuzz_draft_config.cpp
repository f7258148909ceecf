// libFuzzer target: a draft's config.json in the serving layout (speculative/draft.h,
// DraftConfig::from_json). A config that parses must write back a config.json that parses to the
// same config; bad ones must be rejected with an exception that says why.
#include <cstdint>
#include <cstdlib>
#include <optional>

#include "speculative/draft.h"
#include "tools/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using sprig::speculative::DraftConfig;
  std::optional<DraftConfig> config;
  sprig::fuzz::expect_parse_or_reject(
      [&] { config = DraftConfig::from_json(nlohmann::json::parse(data, data + size), "fuzz"); });
  if (!config) return 0;
  const nlohmann::json written = config->to_json(sprig::DType::f32);
  if (DraftConfig::from_json(written, "fuzz").to_json(sprig::DType::f32) != written) std::abort();
  return 0;
}
