// Closest-name suggestions for error messages: the known key nearest a misspelt one, shared by the
// config parsers (data/config.h) and the JSONL record parsers of every layer.
#pragma once

#include <string>
#include <vector>

namespace sprig {

// The entry of `names` (non-empty) closest to `name` by edit distance (the first of equals).
const std::string& closest_name(const std::string& name, const std::vector<std::string>& names);

// "" when `key` is one of `keys`, else `unknown key "<key>" (did you mean "<closest>"?)`: the
// reason a JSON record with a misspelt key is refused (its caller adds where it is).
std::string unknown_record_key(const std::string& key, const std::vector<std::string>& keys);

}  // namespace sprig
