// JSON mask specs and dense safetensors dumps of masks (see mask_io.h).
#include "attention/mask_io.h"

#include <algorithm>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>

#include "tensor/input_file.h"
#include "tensor/json_text.h"
#include "tensor/safetensors.h"

namespace sprig {

namespace {

using json = nlohmann::json;

[[noreturn]] void bad(const std::string& msg) { throw std::invalid_argument("[mask] " + msg); }

// Typed access to the fields of one spec object, with errors naming the field.
class Fields {
 public:
  Fields(const json& spec, const std::string& kind, std::set<std::string> known) : spec_(spec) {
    known.insert("kind");
    for (const auto& [key, value] : spec.items())
      if (!known.count(key)) bad("unknown field \"" + key + "\" for kind \"" + kind + "\"");
  }

  int64_t integer(const char* key) const { return to_int(at(key), key); }
  std::optional<int64_t> optional_integer(const char* key) const {
    return has(key) ? std::optional(integer(key)) : std::nullopt;
  }
  int64_t window() const {
    const int64_t w = optional_integer("sliding_window").value_or(0);
    if (has("sliding_window") && w < 1)
      bad("sliding_window must be >= 1, got " + std::to_string(w));
    return w;
  }
  bool boolean(const char* key, bool fallback) const {
    if (!has(key)) return fallback;
    if (!at(key).is_boolean()) bad(std::string("field \"") + key + "\" must be true or false");
    return at(key).get<bool>();
  }
  std::vector<int64_t> integers(const char* key) const { return to_ints(array(key), key); }
  std::vector<std::vector<int64_t>> integer_lists(const char* key) const {
    std::vector<std::vector<int64_t>> out;
    for (const json& item : array(key)) {
      if (!item.is_array()) bad(std::string("field \"") + key + "\" must be a list of lists");
      out.push_back(to_ints(item, key));
    }
    return out;
  }
  std::vector<bool> flags(const char* key) const {
    std::vector<bool> out;
    for (const json& item : array(key)) {
      if (item.is_boolean())
        out.push_back(item.get<bool>());
      else if (item.is_number_integer() && (item == 0 || item == 1))
        out.push_back(item == 1);
      else
        bad(std::string("field \"") + key + "\" must hold booleans or 0/1, got " + item.dump());
    }
    return out;
  }
  bool has(const char* key) const { return spec_.contains(key); }

 private:
  const json& at(const char* key) const {
    if (!has(key)) bad(std::string("missing field \"") + key + "\"");
    return spec_.at(key);
  }
  const json& array(const char* key) const {
    if (!at(key).is_array()) bad(std::string("field \"") + key + "\" must be a list");
    return at(key);
  }
  static int64_t to_int(const json& v, const char* key) {
    if (!v.is_number_integer())
      bad(std::string("field \"") + key + "\" must hold integers, got " + v.dump());
    // Read as int64_t, JSON's unsigned integers past 2^63 would wrap to negative values.
    if (v.is_number_unsigned() && v.get<uint64_t>() > std::numeric_limits<int64_t>::max())
      bad(std::string("field \"") + key + "\" = " + v.dump() + " does not fit in 64 bits");
    return v.get<int64_t>();
  }
  static std::vector<int64_t> to_ints(const json& list, const char* key) {
    std::vector<int64_t> out;
    for (const json& v : list) out.push_back(to_int(v, key));
    return out;
  }
  const json& spec_;
};

}  // namespace

Mask parse_mask_spec(const std::string& json_text) {
  json spec;
  try {
    spec = parse_json(json_text);
  } catch (const std::runtime_error& e) {  // a syntax error, a key twice, a number out of range
    bad(std::string("spec is not valid JSON: ") + e.what());
  }
  if (!spec.is_object() || !spec.contains("kind") || !spec["kind"].is_string())
    bad("spec must be a JSON object with a string field \"kind\"");
  const std::string kind = spec["kind"];
  if (kind == "causal") {
    const Fields f(spec, kind, {"length", "sliding_window"});
    return causal_mask(f.integer("length"), f.window());
  }
  if (kind == "documents") {
    const Fields f(spec, kind, {"seq_lens", "length", "sliding_window"});
    return document_mask(f.integers("seq_lens"), f.optional_integer("length"), f.window());
  }
  if (kind == "prefix_tree") {
    const Fields f(spec, kind, {"node_lengths", "sample_paths"});
    return prefix_tree_mask(f.integers("node_lengths"), f.integer_lists("sample_paths"));
  }
  if (kind == "dflash") {
    const Fields f(
        spec, kind,
        {"ctx_len", "block_size", "anchors", "keep", "causal", "seq_lens", "sliding_window"});
    DFlashMaskSpec d;
    d.ctx_len = f.integer("ctx_len");
    d.block_size = f.integer("block_size");
    d.anchors = f.integers("anchors");
    d.keep = f.flags("keep");
    d.causal = f.boolean("causal", false);
    if (f.has("seq_lens")) d.seq_lens = f.integers("seq_lens");
    d.sliding_window = f.window();
    return dflash_mask(d);
  }
  bad("unknown kind \"" + kind + "\" (expected causal, documents, prefix_tree or dflash)");
}

Mask load_mask_spec(const std::string& path) {
  check_input_file(path, "a mask spec file (JSON)");
  std::ifstream in(path);
  if (!in) throw std::invalid_argument(path + ": cannot read the mask spec");
  std::stringstream text;
  text << in.rdbuf();
  try {
    return parse_mask_spec(text.str());
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(path + ": " + e.what());
  }
}

void save_mask_safetensors(const Mask& mask, const std::string& path,
                           std::map<std::string, std::string> metadata) {
  save_safetensors(path, {{"mask", mask.dense(), /*as_u8=*/true}}, std::move(metadata));
}

}  // namespace sprig
