// Strict JSON for every file sprig reads (model and draft configs, shard indexes, tokenizers,
// records, trainer states, safetensors headers): an object with a key twice and a NUL byte are
// refused, and every error is a sentence of sprig's own, never the JSON library's exception text.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace sprig {

// Parses `text` as one JSON value. Throws std::runtime_error with what is wrong and where:
// `key "a" appears twice in one object`, `a NUL byte at line 3, column 27 (JSON is text)`,
// `malformed JSON at line 3, column 25: unexpected end of input; expected '[', '{', or a
// literal`, `the number 1e400 is out of range` (on the first line, "at column 25": a JSONL
// record's position in its line).
nlohmann::json parse_json(std::string_view text);

// The JSON file at `path` (checked as an input file by the caller), parsed as above; errors throw
// std::runtime_error "<path>: cannot open it" or "<path>: is not valid JSON: <what is wrong>".
nlohmann::json read_json_file(const std::string& path);

// A JSON library exception's message in those words: without its "[json.exception.<kind>.<id>]"
// tag, a parse error as above (for the errors of reading a parsed value, e.g. "type must be
// number, but is string").
std::string json_error_text(const nlohmann::json::exception& e);

}  // namespace sprig
