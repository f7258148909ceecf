// The overrides of `sprig train`'s command line: the words after its own options, each
// `--section.key=value` or `--section.key value`, as the config loader takes them.
#pragma once

#include <string>
#include <vector>

namespace sprig::tools {

// ["--train.max_steps=3", "--seed", "7"] -> ["train.max_steps=3", "seed=7"]. Throws
// std::invalid_argument (a usage error) for a word that is not an override and for an override
// without a value (an empty one would read as YAML's null: the key's default, silently).
std::vector<std::string> parse_overrides(const std::vector<std::string>& words);

}  // namespace sprig::tools
