#include "tools/jsonl.h"

#include <filesystem>
#include <fstream>
#include <stdexcept>

namespace sprig::tools {

namespace {

bool starts_with_json_object(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::string line;
  if (!std::getline(in, line)) return false;
  const nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  return j.is_object();
}

}  // namespace

const OutputKind kJsonlOutput{"JSON Lines file", false, starts_with_json_object};

int64_t for_each_record(
    const std::string& path,
    const std::function<void(const nlohmann::json& record, const std::string& where)>& fn) {
  if (std::filesystem::is_directory(path))
    throw std::runtime_error(path + " is a directory: give a JSONL file");
  std::ifstream in(path);
  if (!in) throw std::runtime_error(path + ": cannot open the input file");
  int64_t records = 0, line_no = 0;
  for (std::string line; std::getline(in, line);) {
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = path + ":" + std::to_string(line_no);
    nlohmann::json record;
    try {
      record = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception& e) {
      throw std::runtime_error(where + ": malformed JSON (" + std::string(e.what()) + ")" +
                               (in.eof() ? "; the last line looks truncated" : ""));
    }
    if (!record.is_object()) throw std::runtime_error(where + ": a record must be a JSON object");
    fn(record, where);
    ++records;
  }
  return records;
}

}  // namespace sprig::tools
