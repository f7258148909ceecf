// Tokenizer: a Hugging Face `tokenizer.json` of the byte-level BPE kind Qwen2, Qwen2.5 and Qwen3
// ship, encoding text to ids and decoding ids to text exactly as HF `tokenizers` does
// (docs/tokenizer.md). The pipeline of encode:
//   1. bytes that are not UTF-8 are replaced by U+FFFD, one per maximal ill-formed subsequence
//   2. added tokens (special or not) are matched, leftmost-longest, before anything else; their
//      lstrip/rstrip flags take the whitespace beside them
//   3. the normalizer (none or NFC) on each piece between them, then the added tokens marked
//      `normalized` are matched on the normalized pieces
//   4. the pre-tokenizer: Split steps (a regex through PCRE2 with Unicode properties, behaviour
//      Isolated) and ByteLevel (each byte one symbol; its own GPT-2 regex when use_regex is set)
//   5. BPE on each word by merge rank (a word cache per thread saves repeats)
// decode maps ids back to bytes (added tokens to their text) and replaces invalid UTF-8 by U+FFFD
// as HF's ByteLevel decoder does. A Tokenizer is immutable once loaded: encode and decode may be
// called from any number of threads.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sprig::data {

struct AddedToken {
  int32_t id = 0;
  std::string content;
  bool special = false;     // dropped by decode(..., skip_special_tokens = true)
  bool lstrip = false;      // the whitespace before it is part of the match
  bool rstrip = false;      // the whitespace after it is part of the match
  bool normalized = false;  // matched on the normalized text (else on the raw input)
};

// Where an added token was matched by encode: its first byte in the (UTF-8 repaired) input and
// its index in the ids. Chat formatting places message boundaries with them.
struct AddedMatch {
  size_t byte = 0;
  size_t index = 0;
};

class Tokenizer {
 public:
  // Reads DIR/tokenizer.json (or the file itself when `path` is one). Throws
  // std::invalid_argument "[tokenizer] <file>: <what is wrong>" on anything it cannot honour.
  static Tokenizer load(const std::string& path);
  // The same from the text of a tokenizer.json; `where` names it in messages.
  static Tokenizer from_json(std::string_view text, const std::string& where);

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  std::vector<int32_t> encode(std::string_view text) const;
  // Appends the ids of `text` to `ids`; with `added`, also where each added token matched (bytes
  // of `text`, which must then be valid UTF-8 so that they mean the same).
  void encode_into(std::string_view text, std::vector<int32_t>& ids,
                   std::vector<AddedMatch>* added = nullptr) const;
  // Each text's ids, on up to `threads` threads (0: one per core).
  std::vector<std::vector<int32_t>> encode_batch(const std::vector<std::string_view>& texts,
                                                 int threads = 0) const;
  // Ids outside the vocabulary are skipped, as HF does.
  std::string decode(const std::vector<int32_t>& ids, bool skip_special_tokens = false) const;

  // One past the largest id of the vocabulary and the added tokens.
  int64_t vocab_size() const;
  // The id of a token (added or in the vocabulary), if it is one.
  std::optional<int32_t> token_id(std::string_view token) const;
  const std::vector<AddedToken>& added_tokens() const;

  struct Impl;

 private:
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// `text` with every maximal ill-formed UTF-8 subsequence replaced by U+FFFD (what Python's
// bytes.decode("utf-8", errors="replace") and Rust's String::from_utf8_lossy produce).
std::string repair_utf8(std::string_view text);

}  // namespace sprig::data
