// UTF-8 handling, NFC (ICU), byte-level BPE's byte alphabet and PCRE2 regex splitting.
#include "data/unicode_text.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <unicode/bytestream.h>
#include <unicode/normalizer2.h>

#include <array>
#include <stdexcept>

#include "data/tokenizer.h"

namespace sprig::data {

namespace {

// Length of the well-formed sequence at s[i], or 0 with `bad` set to the length of the maximal
// ill-formed subsequence there (Unicode's table 3-7 of well-formed byte sequences).
size_t sequence_length(const unsigned char* s, size_t n, size_t i, size_t& bad) {
  const unsigned char b = s[i];
  if (b < 0x80) return 1;
  size_t need;
  unsigned char lo = 0x80, hi = 0xBF;  // the range of the second byte
  if (b >= 0xC2 && b <= 0xDF) {
    need = 1;
  } else if (b >= 0xE0 && b <= 0xEF) {
    need = 2;
    if (b == 0xE0) lo = 0xA0;
    if (b == 0xED) hi = 0x9F;
  } else if (b >= 0xF0 && b <= 0xF4) {
    need = 3;
    if (b == 0xF0) lo = 0x90;
    if (b == 0xF4) hi = 0x8F;
  } else {
    bad = 1;
    return 0;
  }
  for (size_t k = 1; k <= need; ++k) {
    const bool in_range =
        i + k < n && s[i + k] >= (k == 1 ? lo : 0x80) && s[i + k] <= (k == 1 ? hi : 0xBF);
    if (!in_range) {
      bad = k;
      return 0;
    }
  }
  return need + 1;
}

}  // namespace

bool is_valid_utf8(std::string_view text) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  for (size_t i = 0; i < n;) {
    if (s[i] < 0x80) {
      ++i;
      continue;
    }
    size_t bad = 0;
    const size_t len = sequence_length(s, n, i, bad);
    if (len == 0) return false;
    i += len;
  }
  return true;
}

std::string repair_utf8(std::string_view text) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  std::string out;
  out.reserve(n + 8);
  for (size_t i = 0; i < n;) {
    size_t bad = 0;
    const size_t len = sequence_length(s, n, i, bad);
    if (len > 0) {
      out.append(text.data() + i, len);
      i += len;
    } else {
      out += "\xEF\xBF\xBD";  // U+FFFD
      i += bad;
    }
  }
  return out;
}

char32_t next_code_point(std::string_view text, size_t& i) {
  const auto b = static_cast<unsigned char>(text[i]);
  const size_t len = b < 0x80 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
  char32_t c = len == 1 ? b : b & (0x7F >> len);
  for (size_t k = 1; k < len; ++k) c = (c << 6) | (static_cast<unsigned char>(text[i + k]) & 0x3F);
  i += len;
  return c;
}

char32_t previous_code_point(std::string_view text, size_t& i) {
  size_t start = i - 1;
  while (start > 0 && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) --start;
  size_t j = start;
  const char32_t c = next_code_point(text, j);
  i = start;
  return c;
}

bool is_unicode_whitespace(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
         c == 0x3000;
}

std::string nfc(std::string_view text) {
  bool ascii = true;
  for (char ch : text) ascii = ascii && static_cast<unsigned char>(ch) < 0x80;
  if (ascii) return std::string(text);  // ASCII is always in NFC
  UErrorCode status = U_ZERO_ERROR;
  const icu::Normalizer2* normalizer = icu::Normalizer2::getNFCInstance(status);
  const icu::StringPiece piece(text.data(), static_cast<int32_t>(text.size()));
  if (U_SUCCESS(status) && normalizer->isNormalizedUTF8(piece, status) && U_SUCCESS(status))
    return std::string(text);
  std::string out;
  icu::StringByteSink<std::string> sink(&out, static_cast<int32_t>(text.size()));
  status = U_ZERO_ERROR;
  normalizer->normalizeUTF8(0, piece, sink, nullptr, status);
  if (U_FAILURE(status))
    throw std::runtime_error(std::string("[tokenizer] NFC normalization failed: ") +
                             u_errorName(status));
  return out;
}

namespace {

// GPT-2's bytes_to_unicode: bytes 33-126, 161-172 and 174-255 map to themselves, the others to
// U+0100 + their rank among them.
struct ByteAlphabet {
  std::array<char32_t, 256> to_char{};
  std::array<int16_t, 512> to_byte{};  // every character of the alphabet is below U+0200

  ByteAlphabet() {
    to_byte.fill(-1);
    char32_t next = 0x100;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174;
      to_char[b] = printable ? static_cast<char32_t>(b) : next++;
      to_byte[to_char[b]] = static_cast<int16_t>(b);
    }
  }
};

const ByteAlphabet& alphabet() {
  static const ByteAlphabet table;
  return table;
}

}  // namespace

char32_t byte_to_char(uint8_t byte) { return alphabet().to_char[byte]; }

int byte_of_char(char32_t c) { return c < 512 ? alphabet().to_byte[c] : -1; }

bool byte_level_to_bytes(std::string_view token, std::string& bytes) {
  bytes.clear();
  for (size_t i = 0; i < token.size();) {
    const int b = byte_of_char(next_code_point(token, i));
    if (b < 0) return false;
    bytes += static_cast<char>(b);
  }
  return true;
}

namespace {

std::string pcre2_message(int code) {
  PCRE2_UCHAR buffer[256];
  pcre2_get_error_message(code, buffer, sizeof buffer);
  return reinterpret_cast<const char*>(buffer);
}

// Each thread's match data and JIT stack (PCRE2's are not shareable between threads).
struct MatchScratch {
  pcre2_match_data* data = pcre2_match_data_create(8, nullptr);
  pcre2_match_context* context = pcre2_match_context_create(nullptr);
  pcre2_jit_stack* stack = pcre2_jit_stack_create(32 * 1024, 4 * 1024 * 1024, nullptr);

  MatchScratch() {
    if (data == nullptr || context == nullptr || stack == nullptr)
      throw std::runtime_error("[tokenizer] out of memory for the regex's match data");
    pcre2_jit_stack_assign(context, nullptr, stack);
  }
  ~MatchScratch() {
    pcre2_jit_stack_free(stack);
    pcre2_match_context_free(context);
    pcre2_match_data_free(data);
  }
};

}  // namespace

SplitRegex::SplitRegex(const std::string& pattern, bool literal, const std::string& where) {
  int error = 0;
  PCRE2_SIZE offset = 0;
  const uint32_t options = PCRE2_UTF | PCRE2_UCP | (literal ? PCRE2_LITERAL : 0);
  code_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), options,
                        &error, &offset, nullptr);
  if (code_ == nullptr)
    throw std::invalid_argument("[tokenizer] " + where + ": the split regex does not compile (" +
                                pcre2_message(error) + " at offset " + std::to_string(offset) +
                                "): " + pattern);
  jit_ = pcre2_jit_compile(code_, PCRE2_JIT_COMPLETE) == 0;
}

SplitRegex::SplitRegex(SplitRegex&& other) noexcept : code_(other.code_), jit_(other.jit_) {
  other.code_ = nullptr;
}

SplitRegex::~SplitRegex() { pcre2_code_free(code_); }

void SplitRegex::split(std::string_view text,
                       const std::function<void(std::string_view)>& piece) const {
  thread_local MatchScratch scratch;
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t gap = 0, at = 0;  // start of the text not yet handed out; where to search from
  while (at < text.size()) {
    const int rc = jit_ ? pcre2_jit_match(code_, subject, text.size(), at, PCRE2_NO_UTF_CHECK,
                                          scratch.data, scratch.context)
                        : pcre2_match(code_, subject, text.size(), at, PCRE2_NO_UTF_CHECK,
                                      scratch.data, scratch.context);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) throw std::runtime_error("[tokenizer] regex match failed: " + pcre2_message(rc));
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(scratch.data);
    const size_t begin = ovector[0], end = ovector[1];
    if (end == begin) {  // an empty match splits nothing: search on from the next character
      next_code_point(text, at);
      continue;
    }
    if (begin > gap) piece(text.substr(gap, begin - gap));
    piece(text.substr(begin, end - begin));
    gap = at = end;
  }
  if (gap < text.size()) piece(text.substr(gap));
}

}  // namespace sprig::data
