// libFuzzer target: the training config loader (train/config.h), a YAML file plus the overrides of
// `sprig train`'s command line (tools/overrides.h). The first byte picks the recipe (its value mod
// 4: sft, dflash, domino, jetspec); the rest is the YAML file, then, after a line "%%", one
// command-line word per line (--a.b=value, or --a.b and value). A config that loads must dump a
// resolved YAML that loads again to the same resolved YAML; a bad one must be rejected with an
// exception that says why.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "tools/fuzz/fuzz_input.h"
#include "tools/overrides.h"
#include "train/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  // sft or one of the draft kinds' recipes.
  const auto& kinds = sprig::speculative::draft_kinds();
  const size_t recipe = data[0] % (kinds.size() + 1);
  const sprig::speculative::DraftKind* kind = recipe == 0 ? nullptr : kinds[recipe - 1];
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  const size_t split = text.find("\n%%\n");
  const std::string yaml = text.substr(0, split);
  std::vector<std::string> words;
  if (split != std::string::npos)
    for (size_t start = split + 4; start <= text.size();) {
      const size_t end = std::min(text.find('\n', start), text.size());
      if (end > start) words.push_back(text.substr(start, end - start));
      start = end + 1;
    }
  const std::string& path = sprig::fuzz::scratch_file(reinterpret_cast<const uint8_t*>(yaml.data()),
                                                      yaml.size(), ".yaml");
  sprig::fuzz::expect_parse_or_reject([&] {
    const std::vector<std::string> overrides = sprig::tools::parse_overrides(words);
    const sprig::TrainConfig config = sprig::load_train_config(path, overrides, kind);
    const std::string resolved = config.resolved_yaml;
    const std::string& again = sprig::fuzz::scratch_file(
        reinterpret_cast<const uint8_t*>(resolved.data()), resolved.size(), ".yaml");
    if (sprig::load_train_config(again, {}, kind).resolved_yaml != resolved) std::abort();
  });
  return 0;
}
