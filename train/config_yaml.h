// The YAML reading of the training configs (train/config.cpp, the draft sections in
// train/draft_config.cpp): one error style ("[config] ..."), every number finite, every default
// written back into the config so the resolved config shows every value a run uses. Internal to
// train/.
#pragma once

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "train/config.h"

namespace sprig::config_yaml {

// Throws std::invalid_argument "[config] <message>".
[[noreturn]] void fail(const std::string& message);

// Whether a node is given with a value (YAML's null is no value).
bool present(const YAML::Node& n);

// The shortest text that reads back as `v` ("0.9", where YAML's own writer gives
// "0.90000000000000002"), in fixed notation between 1e-4 and 1e16 ("0.0001") and scientific
// outside ("1e-08"), as Python writes floats.
std::string shortest(double v);

// A value as one line of YAML ("0.9", "[0.9, 1.5]", "{path: ckpt}").
std::string written(const YAML::Node& n);

// A value as it compares: numbers by value ("0.90000000000000002", "0.9" and "9e-1" alike),
// lists element by element, anything else as written.
std::string compared(const YAML::Node& node);

// root[section][key] as T; an absent key gets `fallback`, which is also written into `root` so the
// dumped config shows every value the run uses. Every number read is finite (YAML's .nan and .inf
// are refused here, for every key); ranges are checked by the callers.
template <class T>
T get(YAML::Node& root, const std::string& section, const char* key, T fallback) {
  if (!section.empty() && !present(root[section])) root[section] = YAML::Node(YAML::NodeType::Map);
  YAML::Node sec = section.empty() ? root : root[section];
  if (!present(sec[key])) {
    if constexpr (std::is_same_v<T, double>) {
      sec[key] = shortest(fallback);
    } else if constexpr (std::is_same_v<T, std::vector<double>>) {
      YAML::Node list(YAML::NodeType::Sequence);
      list.SetStyle(YAML::EmitterStyle::Flow);
      for (double v : fallback) list.push_back(shortest(v));
      sec[key] = list;
    } else {
      sec[key] = fallback;
    }
    return fallback;
  }
  const std::string name = (section.empty() ? "" : section + ".") + key;
  T value;
  try {
    value = sec[key].as<T>();
  } catch (const YAML::Exception&) {
    if constexpr (std::is_same_v<T, bool>)
      fail(name + " must be true or false, got " + written(sec[key]));
    if constexpr (std::is_integral_v<T>)
      fail(name + " must be an integer in [" + std::to_string(std::numeric_limits<T>::min()) +
           ", " + std::to_string(std::numeric_limits<T>::max()) + "], got " + written(sec[key]));
    fail(name + " has an invalid value '" + YAML::Dump(sec[key]) + "'");
  }
  bool finite = true;
  if constexpr (std::is_same_v<T, double>) finite = std::isfinite(value);
  if constexpr (std::is_same_v<T, std::vector<double>>)
    finite = std::all_of(value.begin(), value.end(), [](double v) { return std::isfinite(v); });
  if (!finite) fail(name + " must be a finite number, got " + written(sec[key]));
  return value;
}

// The draft recipes' sections (train/draft_config.cpp): target: of every draft recipe; draft: of
// sprig train eagle3 and of a DFlash-family kind (c.draft_kind).
void parse_target(YAML::Node& root, TrainConfig& c);
void parse_eagle3(YAML::Node& root, TrainConfig& c);
void parse_dflash(YAML::Node& root, TrainConfig& c);

}  // namespace sprig::config_yaml
