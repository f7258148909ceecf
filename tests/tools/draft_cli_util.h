// The draft commands' end-to-end tests (draft_cli_test.cpp, reference_drafts_cli_test.cpp): a
// scratch directory per test, `eval dflash` on the golden pair, and readers of their outputs.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "tensor/safetensors.h"
#include "tests/cli_run.h"
#include "tests/nn/checkpoint_fixtures.h"

namespace sprig::testing {

// One JSON value per line of `text`.
inline std::vector<nlohmann::json> json_lines(const std::string& text) {
  std::vector<nlohmann::json> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(nlohmann::json::parse(line));
  return lines;
}

// Every tensor's raw bytes, by name.
inline std::map<std::string, std::string> tensor_bytes(const std::string& path) {
  const SafetensorsFile f(path);
  std::map<std::string, std::string> out;
  for (const StTensorInfo& t : f.tensors())
    out[t.name] = std::string(reinterpret_cast<const char*>(f.raw(t.name)), t.end - t.begin);
  return out;
}

// A scratch directory per test, and `eval dflash` of records on the golden pair.
class DraftCli : public ::testing::Test {
 protected:
  DraftCli()
      : tmp_("draft_cli_" +
             std::string(::testing::UnitTest::GetInstance()->current_test_info()->name())) {}

  CliRun eval(const std::string& records, const std::string& args,
              const std::string& draft = kGoldenDir + "dflash_tiny") {
    testing::write_text(input, records);
    return run_sprig("eval dflash --device cpu --target " + kGoldenDir + "qwen3_tiny --draft " +
                         draft + " --input " + input + " " + args,
                     dir);
  }

  testing::NamedTempDir tmp_;
  const std::string& dir = tmp_.path;
  const std::string input = dir + "/records.jsonl", out = dir + "/eval.safetensors";
};

}  // namespace sprig::testing
