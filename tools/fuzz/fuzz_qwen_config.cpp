// libFuzzer target: Hugging Face config.json parsing (nn/qwen_config.h). A config that parses
// must write back a config.json that parses to the same fields; bad ones must be rejected with an
// exception that says why.
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>

#include "nn/qwen_config.h"
#include "tools/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::optional<sprig::QwenConfig> config;
  sprig::fuzz::expect_parse_or_reject([&] {
    config = sprig::QwenConfig::from_json(nlohmann::json::parse(data, data + size), "fuzz");
  });
  if (!config) return 0;
  const sprig::QwenConfig again = sprig::QwenConfig::from_json(config->to_json(), "fuzz");
  if (again.to_json() != config->to_json() ||
      again.sliding_window_per_layer != config->sliding_window_per_layer)
    std::abort();
  return 0;
}
