// What a loaded Tokenizer holds (data/tokenizer.h), shared by its loader (tokenizer_json.cpp) and
// its encoder and decoder (tokenizer.cpp). Internal to data/.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "data/tokenizer.h"
#include "data/unicode_text.h"

namespace sprig::data {

// Merge ranks by pair of ids: open addressing over the packed pair (left << 32 | right).
class MergeTable {
 public:
  struct Merge {
    int32_t rank = -1;  // -1: not a merge
    int32_t merged = -1;
  };
  void build(const std::vector<std::pair<uint64_t, Merge>>& merges);
  Merge find(int32_t left, int32_t right) const;
  static uint64_t key(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) |
           static_cast<uint32_t>(right);
  }

 private:
  size_t slot(uint64_t k) const {
    return static_cast<size_t>((k * 0x9E3779B97F4A7C15ull) >> shift_);
  }
  std::vector<uint64_t> keys_;
  std::vector<Merge> values_;
  int shift_ = 64;
};

// Added tokens matched leftmost-longest (what HF's Aho-Corasick search with LeftmostLongest
// finds), by first byte.
class AddedMatcher {
 public:
  void add(const AddedToken& token);
  bool empty() const { return tokens_.empty(); }
  // The longest token matching at byte i, or nullptr.
  const AddedToken* match(std::string_view text, size_t i) const;

 private:
  std::vector<AddedToken> tokens_;
  std::array<std::vector<size_t>, 256> by_first_byte_;  // longest first
};

// One step of the pre-tokenizer: a Split regex, or ByteLevel's own regex when use_regex is set
// (ByteLevel's byte mapping itself needs no step: words are kept as bytes).
struct PreTokenizerStep {
  SplitRegex regex;
};

struct Tokenizer::Impl {
  uint64_t instance = 0;  // unique per loaded tokenizer: keys the per-thread word caches
  std::unordered_map<std::string, int32_t> vocab_tokens;  // as written in tokenizer.json
  std::unordered_map<std::string, int32_t> vocab_bytes;   // the same, as the bytes they stand for
  std::array<int32_t, 256> byte_ids{};                    // the id of each single byte, or -1
  MergeTable merges;
  std::optional<int32_t> unk_id;
  bool ignore_merges = false;
  bool nfc = false;
  std::vector<PreTokenizerStep> steps;
  std::vector<AddedToken> added;
  AddedMatcher raw_added, normalized_added;
  // What decode writes for each id, and whether it is special; ids of neither are skipped.
  std::vector<std::string> id_bytes;
  std::vector<uint8_t> id_kind;  // 0: no token, 1: vocabulary or added, 2: special added token
  int64_t vocab_size = 0;
};

}  // namespace sprig::data
