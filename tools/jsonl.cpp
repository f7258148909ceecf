#include "tools/jsonl.h"

#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "tensor/input_file.h"
#include "tensor/json_text.h"

namespace sprig::tools {

namespace {

// JSON Lines has no room for the writer's name: a file whose first line is a JSON object passes.
std::string refuses_jsonl(const std::filesystem::path& existing, const OutputKind& kind) {
  std::ifstream in(existing);
  std::string line;
  const bool object = std::getline(in, line) &&
                      nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false).is_object();
  return object ? "" : "is not a " + std::string(kind.name) + " that sprig wrote";
}

}  // namespace

const OutputKind kJsonlOutput{"JSON Lines file", nullptr, false, refuses_jsonl};

int64_t for_each_record(
    const std::string& path,
    const std::function<void(const nlohmann::json& record, const std::string& where)>& fn) {
  check_input_file(path, "a JSONL file");
  std::ifstream in(path);
  if (!in) throw std::runtime_error(path + ": cannot open the input file");
  int64_t records = 0, line_no = 0;
  for (std::string line; std::getline(in, line);) {
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = path + ":" + std::to_string(line_no);
    nlohmann::json record;
    try {
      record = parse_json(line);
    } catch (const std::runtime_error& e) {
      throw std::runtime_error(where + ": " + e.what() +
                               (in.eof() ? "; the last line looks truncated" : ""));
    }
    if (!record.is_object()) throw std::runtime_error(where + ": a record must be a JSON object");
    fn(record, where);
    ++records;
  }
  return records;
}

}  // namespace sprig::tools
