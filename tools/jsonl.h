// The JSONL input of the commands that take one record per line (`score`, `eval`).
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "tensor/output.h"

namespace sprig::tools {

// Calls fn(record, where) for every non-blank line of `path`, where = "path:line". Stops with
// "<where>: malformed JSON (...)" (saying so when the last line looks truncated) or "<where>: a
// record must be a JSON object"; an unreadable file with "<path>: cannot open the input file".
// Returns the number of records.
int64_t for_each_record(
    const std::string& path,
    const std::function<void(const nlohmann::json& record, const std::string& where)>& fn);

// A file whose first line is a JSON object: what `--overwrite` may replace for a JSONL output.
extern const OutputKind kJsonlOutput;

}  // namespace sprig::tools
