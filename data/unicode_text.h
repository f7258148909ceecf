// The Unicode pieces the tokenizer (data/tokenizer.h) is built from: UTF-8 repair and decoding,
// NFC through ICU, Unicode whitespace, the GPT-2 byte-to-character map of byte-level BPE, and
// regex splitting through PCRE2 (UTF and Unicode properties, JIT-compiled). Internal to data/.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

struct pcre2_real_code_8;

namespace sprig::data {

// Whether `text` is well-formed UTF-8.
bool is_valid_utf8(std::string_view text);

// The code point starting at byte i of valid UTF-8 `text`, and i moved past it.
char32_t next_code_point(std::string_view text, size_t& i);
// The code point ending just before byte i of valid UTF-8 `text`, and i moved to its start.
char32_t previous_code_point(std::string_view text, size_t& i);

// Unicode White_Space (what Rust's char::is_whitespace tests).
bool is_unicode_whitespace(char32_t c);

// `text` (valid UTF-8) in Normalization Form C.
std::string nfc(std::string_view text);

// Byte-level BPE's alphabet: each byte is written as one printable character (GPT-2's table:
// printable Latin-1 bytes stand for themselves, the other 68 for U+0100 onwards).
char32_t byte_to_char(uint8_t byte);
// The byte a character of that alphabet stands for, or -1.
int byte_of_char(char32_t c);
// A token of the vocabulary (alphabet characters) as the bytes it stands for; false when it holds
// a character outside the alphabet.
bool byte_level_to_bytes(std::string_view token, std::string& bytes);

// A compiled regex that splits text the way HF's Split pre-tokenizer does with behaviour
// Isolated: every match is a piece, and so is the text between matches.
class SplitRegex {
 public:
  // `literal`: the pattern is a plain string. Throws std::invalid_argument naming `where` and
  // PCRE2's message when the pattern does not compile.
  SplitRegex(const std::string& pattern, bool literal, const std::string& where);
  SplitRegex(SplitRegex&& other) noexcept;
  SplitRegex& operator=(SplitRegex&&) = delete;
  ~SplitRegex();

  // Calls `piece` on each non-empty piece of valid UTF-8 `text`, in order.
  void split(std::string_view text, const std::function<void(std::string_view)>& piece) const;

 private:
  pcre2_real_code_8* code_ = nullptr;
  bool jit_ = false;
};

}  // namespace sprig::data
