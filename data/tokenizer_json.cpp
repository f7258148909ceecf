// Loading a Hugging Face tokenizer.json into a Tokenizer (data/tokenizer.h): the BPE model, the
// added tokens, the normalizer and the pre-tokenizer, each checked against what sprig implements;
// anything else is refused by name.
#include <atomic>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <unordered_map>

#include "data/tokenizer_impl.h"
#include "tensor/input_file.h"
#include "tensor/json_text.h"

namespace sprig::data {

namespace {

using nlohmann::json;

// The one message form of the loader: "[tokenizer] <file>: <what is wrong>".
struct Problem {
  const std::string& where;
  [[noreturn]] void operator()(const std::string& what) const {
    throw std::invalid_argument("[tokenizer] " + where + ": " + what);
  }
};

const json& member(const json& object, const char* key, const std::string& name,
                   const Problem& fail) {
  if (!object.is_object()) fail(name + " must be an object, got " + object.dump());
  const auto it = object.find(key);
  if (it == object.end()) fail("missing \"" + std::string(key) + "\" in " + name);
  return *it;
}

bool flag(const json& object, const char* key, bool fallback, const Problem& fail) {
  const auto it = object.find(key);
  if (it == object.end() || it->is_null()) return fallback;
  if (!it->is_boolean()) fail(std::string(key) + " must be true or false, got " + it->dump());
  return it->get<bool>();
}

std::string type_of(const json& step, const std::string& name, const Problem& fail) {
  const json& type = member(step, "type", name, fail);
  if (!type.is_string()) fail(name + ".type must be a string, got " + type.dump());
  return type.get<std::string>();
}

// Decoding keeps a table of one entry per id up to the largest (build_decode_table): ids stop at
// 2^24, far above any real vocabulary (Qwen's ends near 152k), so the table stays under 1 GB.
constexpr int64_t kTokenIdLimit = int64_t{1} << 24;

int32_t token_id_value(const json& v, const std::string& name, const Problem& fail) {
  if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() >= kTokenIdLimit)
    fail(name + " must be a token id (an integer in [0, 2^24)), got " + v.dump());
  return static_cast<int32_t>(v.get<int64_t>());
}

void load_normalizer(const json& normalizer, Tokenizer::Impl& t, const Problem& fail) {
  if (normalizer.is_null()) return;
  const std::string type = type_of(normalizer, "normalizer", fail);
  if (type == "NFC") {
    t.nfc = true;
  } else if (type == "Sequence") {
    const json& list = member(normalizer, "normalizers", "normalizer", fail);
    if (!list.is_array()) fail("normalizer.normalizers must be an array");
    for (const json& n : list) load_normalizer(n, t, fail);
  } else {
    fail("unsupported normalizer '" + type + "' (supported: NFC, or none)");
  }
}

// GPT-2's split regex, which ByteLevel applies itself when use_regex is true.
constexpr const char* kByteLevelRegex =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

void load_pre_tokenizer(const json& pre, Tokenizer::Impl& t, bool& byte_level,
                        const Problem& fail) {
  if (pre.is_null()) return;
  const std::string type = type_of(pre, "pre_tokenizer", fail);
  if (type == "Sequence") {
    const json& list = member(pre, "pretokenizers", "pre_tokenizer", fail);
    if (!list.is_array()) fail("pre_tokenizer.pretokenizers must be an array");
    for (const json& p : list) load_pre_tokenizer(p, t, byte_level, fail);
  } else if (type == "Split") {
    if (byte_level) fail("a Split pre-tokenizer after ByteLevel is not supported");
    const json& pattern = member(pre, "pattern", "the Split pre-tokenizer", fail);
    const bool literal = pattern.contains("String");
    const json& text =
        literal ? pattern["String"] : member(pattern, "Regex", "Split.pattern", fail);
    if (!text.is_string()) fail("Split.pattern must hold a string, got " + pattern.dump());
    const json behavior = pre.value("behavior", json("Isolated"));
    if (behavior != "Isolated")
      fail("unsupported Split behavior " + behavior.dump() + " (supported: Isolated)");
    if (flag(pre, "invert", false, fail)) fail("unsupported Split with invert: true");
    t.steps.push_back({SplitRegex(text.get<std::string>(), literal, fail.where)});
  } else if (type == "ByteLevel") {
    if (flag(pre, "add_prefix_space", true, fail))
      fail("unsupported ByteLevel pre-tokenizer with add_prefix_space: true");
    if (flag(pre, "use_regex", true, fail))
      t.steps.push_back({SplitRegex(kByteLevelRegex, false, fail.where)});
    byte_level = true;
  } else {
    fail("unsupported pre-tokenizer '" + type + "' (supported: Split, ByteLevel, Sequence)");
  }
}

void load_model(const json& model, Tokenizer::Impl& t, const Problem& fail) {
  if (!model.is_object()) fail("\"model\" must be an object, got " + model.dump());
  const std::string type = model.contains("type") ? type_of(model, "model", fail) : "BPE";
  if (type != "BPE") fail("unsupported model type '" + type + "' (supported: BPE)");
  if (model.contains("dropout") && !model["dropout"].is_null() &&
      !(model["dropout"].is_number() && model["dropout"].get<double>() == 0.0))
    fail("unsupported BPE dropout " + model["dropout"].dump() + " (encoding would be random)");
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"})
    if (model.contains(key) && !model[key].is_null() && model[key] != "")
      fail(std::string("unsupported BPE ") + key + " " + model[key].dump());
  if (flag(model, "byte_fallback", false, fail)) fail("unsupported BPE byte_fallback: true");
  t.ignore_merges = flag(model, "ignore_merges", false, fail);

  const json& vocab = member(model, "vocab", "model", fail);
  if (!vocab.is_object()) fail("model.vocab must be an object of token: id");
  std::string bytes;
  std::unordered_map<int32_t, std::string> token_of_id;  // an id names one token
  for (const auto& [token, id] : vocab.items()) {
    const int32_t value = token_id_value(id, "model.vocab[\"" + token + "\"]", fail);
    if (const auto [it, fresh] = token_of_id.emplace(value, token); !fresh)
      fail("model.vocab gives id " + std::to_string(value) + " to two tokens, " +
           json(it->second).dump() + " and " + json(token).dump());
    t.vocab_tokens.emplace(token, value);
    if (!byte_level_to_bytes(token, bytes))
      fail("model.vocab[\"" + token +
           "\"] is not a byte-level token (a character outside the byte alphabet)");
    t.vocab_bytes.emplace(bytes, value);
    t.vocab_size = std::max<int64_t>(t.vocab_size, int64_t{value} + 1);
  }
  t.byte_ids.fill(-1);
  for (int b = 0; b < 256; ++b) {
    const auto it = t.vocab_bytes.find(std::string(1, static_cast<char>(b)));
    if (it != t.vocab_bytes.end()) t.byte_ids[b] = it->second;
  }

  const json& merges = member(model, "merges", "model", fail);
  if (!merges.is_array()) fail("model.merges must be an array");
  std::vector<std::pair<uint64_t, MergeTable::Merge>> table;
  table.reserve(merges.size());
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const json& m = merges[rank];
    const std::string name = "model.merges[" + std::to_string(rank) + "]";
    std::string left, right;
    if (m.is_string()) {  // "a b"
      const std::string s = m.get<std::string>();
      const size_t space = s.find(' ');
      if (space == std::string::npos || s.find(' ', space + 1) != std::string::npos)
        fail(name + " must be two tokens separated by one space, got " + m.dump());
      left = s.substr(0, space);
      right = s.substr(space + 1);
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      left = m[0].get<std::string>();
      right = m[1].get<std::string>();
    } else {
      fail(name + " must be \"a b\" or [\"a\", \"b\"], got " + m.dump());
    }
    auto id_of = [&](const std::string& token) {
      const auto it = t.vocab_tokens.find(token);
      if (it == t.vocab_tokens.end())
        fail(name + " " + m.dump() + ": \"" + token + "\" is not in the vocabulary");
      return it->second;
    };
    const int32_t a = id_of(left), b = id_of(right), merged = id_of(left + right);
    table.push_back({MergeTable::key(a, b), {static_cast<int32_t>(rank), merged}});
  }
  t.merges.build(table);

  if (model.contains("unk_token") && !model["unk_token"].is_null()) {
    const json& unk = model["unk_token"];
    if (!unk.is_string() || !t.vocab_tokens.count(unk.get<std::string>()))
      fail("model.unk_token " + unk.dump() + " is not in the vocabulary");
    t.unk_id = t.vocab_tokens[unk.get<std::string>()];
  }
}

void load_added_tokens(const json& list, Tokenizer::Impl& t, const Problem& fail) {
  if (list.is_null()) return;
  if (!list.is_array()) fail("\"added_tokens\" must be an array");
  std::unordered_map<int32_t, std::string> vocab_token_of_id;
  for (const auto& [token, id] : t.vocab_tokens) vocab_token_of_id.emplace(id, token);
  for (size_t i = 0; i < list.size(); ++i) {
    const json& a = list[i];
    const std::string name = "added_tokens[" + std::to_string(i) + "]";
    AddedToken token;
    token.id = token_id_value(member(a, "id", name, fail), name + ".id", fail);
    const json& content = member(a, "content", name, fail);
    if (!content.is_string() || content.get<std::string>().empty())
      fail(name + ".content must be a non-empty string, got " + content.dump());
    token.content = content.get<std::string>();
    if (!is_valid_utf8(token.content)) fail(name + ".content is not valid UTF-8");
    token.special = flag(a, "special", false, fail);
    token.lstrip = flag(a, "lstrip", false, fail);
    token.rstrip = flag(a, "rstrip", false, fail);
    token.normalized = flag(a, "normalized", !token.special, fail);
    if (flag(a, "single_word", false, fail))
      fail(name + " (" + token.content + "): single_word: true is not supported");
    // An added token may repeat its vocabulary entry (GPT-2's <|endoftext|>), not take another's
    // id or an earlier added token's.
    for (const AddedToken& earlier : t.added)
      if (earlier.id == token.id)
        fail(name + " (" + token.content + ") takes id " + std::to_string(token.id) +
             ", already added_tokens' " + json(earlier.content).dump());
    if (const auto it = vocab_token_of_id.find(token.id);
        it != vocab_token_of_id.end() && it->second != token.content)
      fail(name + " (" + token.content + ") takes id " + std::to_string(token.id) +
           ", model.vocab's " + json(it->second).dump());
    (token.normalized ? t.normalized_added : t.raw_added).add(token);
    t.added.push_back(token);
    t.vocab_size = std::max<int64_t>(t.vocab_size, int64_t{token.id} + 1);
  }
}

void check_decoder(const json& decoder, const Problem& fail) {
  if (decoder.is_null()) fail("missing decoder (supported: ByteLevel)");
  const std::string type = type_of(decoder, "decoder", fail);
  if (type != "ByteLevel") fail("unsupported decoder '" + type + "' (supported: ByteLevel)");
}

// What decode writes for each id: a vocabulary token's bytes; an added token's text as HF's
// ByteLevel decoder treats it (read as byte-level characters when every character is one, else
// its UTF-8 as it stands).
void build_decode_table(Tokenizer::Impl& t) {
  t.id_bytes.assign(static_cast<size_t>(t.vocab_size), "");
  t.id_kind.assign(static_cast<size_t>(t.vocab_size), 0);
  for (const auto& [bytes, id] : t.vocab_bytes) {
    t.id_bytes[id] = bytes;
    t.id_kind[id] = 1;
  }
  for (const AddedToken& a : t.added) {
    std::string bytes;
    if (!byte_level_to_bytes(a.content, bytes)) bytes = a.content;
    t.id_bytes[a.id] = bytes;
    t.id_kind[a.id] = a.special ? 2 : 1;
  }
}

std::atomic<uint64_t> next_instance{1};

}  // namespace

Tokenizer Tokenizer::from_json(std::string_view text, const std::string& where) {
  const Problem fail{where};
  json root;
  try {
    root = parse_json(text);
  } catch (const std::runtime_error& e) {
    fail(std::string("not valid JSON (") + e.what() + ")");
  }
  if (!root.is_object()) fail("expected a JSON object at the top level");
  auto impl = std::make_unique<Impl>();
  impl->instance = next_instance++;
  if (!root.contains("model")) fail("missing \"model\" (the BPE vocabulary and merges)");
  load_model(root["model"], *impl, fail);
  load_normalizer(root.value("normalizer", json()), *impl, fail);
  bool byte_level = false;
  load_pre_tokenizer(root.value("pre_tokenizer", json()), *impl, byte_level, fail);
  if (!byte_level)
    fail("the pre-tokenizer has no ByteLevel step (only byte-level BPE is supported)");
  check_decoder(root.value("decoder", json()), fail);
  load_added_tokens(root.value("added_tokens", json()), *impl, fail);
  build_decode_table(*impl);
  return Tokenizer(std::move(impl));
}

Tokenizer Tokenizer::load(const std::string& path) {
  namespace fs = std::filesystem;
  const std::string file =
      fs::is_directory(path) ? (fs::path(path) / "tokenizer.json").string() : path;
  check_input_file(file, "tokenizer.json or its directory", "[tokenizer] ");
  std::ifstream in(file, std::ios::binary);
  if (!in) throw std::invalid_argument("[tokenizer] cannot open " + file);
  const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  return from_json(text, file);
}

}  // namespace sprig::data
