// Closest-name suggestions by edit distance.
#include "tensor/names.h"

#include <algorithm>

namespace sprig {

namespace {

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);  // distances from a[0..i) to every prefix of b
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t substitute = diagonal + (a[i - 1] != b[j - 1]);
      diagonal = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, substitute});
    }
  }
  return row[b.size()];
}

}  // namespace

const std::string& closest_name(const std::string& name, const std::vector<std::string>& names) {
  return *std::min_element(names.begin(), names.end(),
                           [&](const std::string& x, const std::string& y) {
                             return edit_distance(name, x) < edit_distance(name, y);
                           });
}

std::string unknown_record_key(const std::string& key, const std::vector<std::string>& keys) {
  if (std::find(keys.begin(), keys.end(), key) != keys.end()) return "";
  return "unknown key \"" + key + "\" (did you mean \"" + closest_name(key, keys) + "\"?)";
}

}  // namespace sprig
