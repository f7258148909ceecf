// Strict JSON for every file sprig reads (model and draft configs, shard indexes, tokenizers,
// records, trainer states, safetensors headers): an object with a key twice and a NUL byte are
// refused, and every error is a sentence of sprig's own, never the JSON library's exception text.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace sprig {

// Parses `text` as one JSON value. Throws std::runtime_error with what is wrong and where:
// `key "a" appears twice in one object`, `a NUL byte at line 1, column 27 (JSON is text)`,
// `malformed JSON at line 1, column 25: unexpected end of input; expected '[', '{', or a
// literal`, `the number 1e400 is out of range`.
nlohmann::json parse_json(std::string_view text);

// A JSON library exception's message in those words: without its "[json.exception.<kind>.<id>]"
// tag, a parse error as above (for the errors of reading a parsed value, e.g. "type must be
// number, but is string").
std::string json_error_text(const nlohmann::json::exception& e);

}  // namespace sprig
