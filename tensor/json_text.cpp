#include "tensor/json_text.h"

#include <algorithm>
#include <fstream>
#include <iterator>
#include <set>
#include <stdexcept>
#include <vector>

namespace sprig {

using json = nlohmann::json;

std::string json_error_text(const json::exception& e) {
  std::string text = e.what();
  if (text.rfind("[json.exception.", 0) == 0 && text.find("] ") != std::string::npos)
    text = text.substr(text.find("] ") + 2);
  // "parse error at line 2, column 25: syntax error while parsing value - unexpected end of
  // input; ..." -> "malformed JSON at line 2, column 25: unexpected end of input; ..." (on line
  // 1, "at column 25")
  const std::string parse_error = "parse error at ";
  if (text.rfind(parse_error, 0) == 0) {
    const size_t colon = text.find(": "), dash = text.find(" - ");
    std::string where = text.substr(parse_error.size(), colon - parse_error.size());
    if (where.rfind("line 1, ", 0) == 0) where = where.substr(8);  // one line: a JSONL record
    const std::string what = dash != std::string::npos    ? text.substr(dash + 3)
                             : colon != std::string::npos ? text.substr(colon + 2)
                                                          : text;
    return "malformed JSON at " + where + ": " + what;
  }
  // "number overflow parsing '1e400'" -> "the number 1e400 is out of range"
  const std::string overflow = "number overflow parsing '";
  if (text.rfind(overflow, 0) == 0 && text.back() == '\'')
    return "the number " + text.substr(overflow.size(), text.size() - overflow.size() - 1) +
           " is out of range";
  return text;
}

json parse_json(std::string_view text) {
  if (const size_t nul = text.find('\0'); nul != std::string_view::npos) {
    const std::string_view before = text.substr(0, nul);
    const size_t line_start = before.rfind('\n');
    const size_t line = 1 + static_cast<size_t>(std::count(before.begin(), before.end(), '\n'));
    const size_t column = nul - (line_start == std::string_view::npos ? 0 : line_start + 1) + 1;
    throw std::runtime_error("a NUL byte at " +
                             (line > 1 ? "line " + std::to_string(line) + ", " : std::string()) +
                             "column " + std::to_string(column) + " (JSON is text)");
  }
  // The keys seen in each open object, by depth.
  std::vector<std::set<std::string>> keys;
  std::string duplicate;
  const json::parser_callback_t check = [&](int depth, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::object_start) {
      if (keys.size() <= static_cast<size_t>(depth) + 1) keys.resize(depth + 2);
      keys[depth + 1].clear();
    } else if (event == json::parse_event_t::key && duplicate.empty() &&
               !keys[depth].insert(parsed.get<std::string>()).second) {
      duplicate = parsed.get<std::string>();
    }
    return true;
  };
  json j;
  try {
    j = json::parse(text.begin(), text.end(), check);
  } catch (const json::exception& e) {
    throw std::runtime_error(json_error_text(e));
  }
  if (!duplicate.empty())
    throw std::runtime_error("key \"" + duplicate + "\" appears twice in one object");
  return j;
}

json read_json_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(path + ": cannot open it");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  try {
    return parse_json(text);
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(path + ": is not valid JSON: " + e.what());
  }
}

}  // namespace sprig
