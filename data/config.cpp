// DataConfig from YAML (yaml-cpp), with validation and closest-key suggestions.
#include "data/config.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <map>
#include <stdexcept>

#include "tensor/input_file.h"
#include "tensor/names.h"

namespace sprig::data {

namespace {

const std::vector<std::string> kKeys = {
    "train",     "val",     "format",     "seq_len",          "packing", "micro_batch_size",
    "pad_id",    "eot_id",  "vocab_size", "skip_bad_records", "shuffle", "drop_long_samples",
    "max_packs", "rollouts"};

[[noreturn]] void fail(const std::string& message) {
  throw std::invalid_argument("[config] " + message);
}

bool present(const YAML::Node& node) { return node.IsDefined() && !node.IsNull(); }

// What a value of type T looks like, for messages.
template <class T> constexpr const char* kind() { return "an integer"; }
template <> constexpr const char* kind<bool>() { return "true or false"; }
template <> constexpr const char* kind<std::string>() { return "a string"; }

template <class T> T read(const YAML::Node& node, const std::string& name) {
  try {
    return node.as<T>();
  } catch (const YAML::Exception&) {
    fail(name + " must be " + kind<T>() + ", got '" + YAML::Dump(node) + "'");
  }
}

// A key of `data:` as T, or `fallback` when absent.
template <class T> T value_or(const YAML::Node& data, const char* key, T fallback) {
  const YAML::Node node = data[key];
  return present(node) ? read<T>(node, std::string("data.") + key) : fallback;
}

// A path or a list of paths.
std::vector<std::string> paths(const YAML::Node& node, const char* key) {
  if (!present(node)) return {};
  const std::string name = std::string("data.") + key;
  if (!node.IsSequence()) return {read<std::string>(node, name)};
  std::vector<std::string> out;
  for (const YAML::Node& item : node) out.push_back(read<std::string>(item, name));
  return out;
}

void check_id(int64_t id, const char* key, int64_t vocab_size) {
  if (id < 0 || (vocab_size > 0 && id >= vocab_size))
    fail(std::string("data.") + key + " = " + std::to_string(id) + " is not a token id " +
         (vocab_size > 0 ? "in [0, " + std::to_string(vocab_size) + ")" : "(negative)"));
}

}  // namespace

void check_known_key(const std::string& key, const std::vector<std::string>& keys,
                     const std::string& prefix) {
  if (std::find(keys.begin(), keys.end(), key) != keys.end()) return;
  fail("unknown key " + prefix + key + " (did you mean " + prefix + closest_name(key, keys) + "?)");
}

DataConfig parse_data_config(const YAML::Node& root) {
  if (!root.IsMap()) fail("expected a mapping at the top level");
  const YAML::Node data = root["data"];
  if (!present(data)) fail("missing the data: section");
  if (!data.IsMap()) fail("data: must be a mapping of keys to values");
  for (const auto& entry : data) check_known_key(entry.first.as<std::string>(), kKeys, "data.");

  DataConfig c;
  if (present(root["seed"])) c.seed = read<uint64_t>(root["seed"], "seed");
  c.train = paths(data["train"], "train");
  c.val = paths(data["val"], "val");
  if (c.train.empty()) fail("data.train is required (a path or a list of paths)");
  c.format = format_from_name(value_or<std::string>(data, "format", "documents"));
  if (c.format != DataFormat::rollouts && !present(data["packing"]))
    fail(std::string("data.packing is required for format ") + format_name(c.format) +
         " (dflash, padded, sft or bfd)");
  c.packing = packing_from_name(value_or<std::string>(data, "packing", "fold"));
  check_format_packing(c.format, c.packing);
  c.seq_len = value_or<int64_t>(data, "seq_len", 0);
  if (!present(data["seq_len"])) fail("data.seq_len is required (tokens per row)");
  if (c.seq_len <= 0) fail("data.seq_len must be positive, got " + std::to_string(c.seq_len));
  c.micro_batch_size = value_or<int64_t>(data, "micro_batch_size", 1);
  if (c.micro_batch_size <= 0)
    fail("data.micro_batch_size must be positive, got " + std::to_string(c.micro_batch_size));
  c.vocab_size = value_or<int64_t>(data, "vocab_size", 0);
  if (c.vocab_size < 0)
    fail("data.vocab_size must be positive, got " + std::to_string(c.vocab_size));
  c.pad_id = value_or<int64_t>(data, "pad_id", 0);
  check_id(c.pad_id, "pad_id", c.vocab_size);
  if (c.format == DataFormat::shards) {
    if (!present(data["eot_id"])) fail("data.eot_id is required for format shards");
    c.eot_id = value_or<int64_t>(data, "eot_id", -1);
    check_id(c.eot_id, "eot_id", c.vocab_size);
  }
  c.skip_bad_records = value_or<bool>(data, "skip_bad_records", false);
  c.shuffle = value_or<bool>(data, "shuffle", true);
  c.drop_long_samples = value_or<bool>(data, "drop_long_samples", true);
  c.max_packs = value_or<int64_t>(data, "max_packs", 0);
  if (c.max_packs < 0)
    fail("data.max_packs must be >= 0 (0: all), got " + std::to_string(c.max_packs));
  if (const YAML::Node rollouts = data["rollouts"]; present(rollouts)) {
    if (c.format != DataFormat::rollouts)
      fail(std::string("data.rollouts applies to format rollouts, not ") + format_name(c.format));
    if (!rollouts.IsMap())
      fail("data.rollouts must be a mapping, e.g. {supervise_first_token: true}");
    for (const auto& entry : rollouts)
      check_known_key(entry.first.as<std::string>(), {"supervise_first_token"}, "data.rollouts.");
    if (present(rollouts["supervise_first_token"]))
      c.supervise_first_token =
          read<bool>(rollouts["supervise_first_token"], "data.rollouts.supervise_first_token");
  }
  return c;
}

void make_paths_absolute(YAML::Node node, const std::filesystem::path& base) {
  const auto absolute = [&](YAML::Node item) {
    if (!item.IsScalar()) return;
    const std::filesystem::path p = item.as<std::string>();
    if (!p.empty() && p.is_relative()) item = (base / p).lexically_normal().string();
  };
  if (node.IsSequence())
    for (YAML::Node item : node) absolute(item);
  else
    absolute(node);
}

namespace {

// Refuses a key twice in any mapping under `node` (`prefix`: the dotted path to it).
void check_unique_keys(const YAML::Node& node, const std::string& prefix, const std::string& path) {
  if (node.IsSequence())
    for (const YAML::Node& item : node) check_unique_keys(item, prefix, path);
  if (!node.IsMap()) return;
  std::map<std::string, int> line_of;
  for (const auto& entry : node) {
    const std::string key = prefix + entry.first.Scalar();
    const int line = entry.first.Mark().line + 1;
    if (const auto [it, first] = line_of.emplace(key, line); !first)
      throw std::invalid_argument("[config] " + path + ":" + std::to_string(line) + ": " + key +
                                  " appears twice (also on line " + std::to_string(it->second) +
                                  ")");
    check_unique_keys(entry.second, key + ".", path);
  }
}

}  // namespace

YAML::Node load_yaml_file(const std::string& path) {
  check_input_file(path, "a config file (YAML)", "[config] ");
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const YAML::BadFile&) {
    throw std::invalid_argument("[config] cannot open " + path);
  } catch (const YAML::ParserException& e) {
    throw std::invalid_argument("[config] " + path + ":" + std::to_string(e.mark.line + 1) + ": " +
                                e.msg);
  }
  check_unique_keys(root, "", path);
  return root;
}

DataConfig load_data_config(const std::string& path) {
  YAML::Node root = load_yaml_file(path);
  try {
    const std::filesystem::path base = std::filesystem::absolute(path).parent_path();
    if (root.IsMap() && root["data"].IsMap())
      for (const char* key : {"train", "val"})
        if (present(root["data"][key])) make_paths_absolute(root["data"][key], base);
    return parse_data_config(root);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(std::string(e.what()) + " in " + path);
  }
}

}  // namespace sprig::data
