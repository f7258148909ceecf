// Helpers for the end-to-end tests of `sprig data`: a fixture that owns a temporary directory and
// runs the real `sprig` executable (SPRIG_BIN) there, capturing its exit code, stdout and stderr.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/cli_run.h"

namespace sprig::data::testing {

using Ids = std::vector<int64_t>;

using sprig::testing::CliRun;
inline std::string read_text(const std::string& path) { return sprig::testing::file_text(path); }

// Each test gets its own directory for the files it writes and the commands' outputs.
class DataCli : public ::testing::Test {
 protected:
  DataCli()
      : dir_(std::filesystem::temp_directory_path() /
             ("sprig_data_cli_" + std::to_string(getpid()) + "_" +
              ::testing::UnitTest::GetInstance()->current_test_info()->name())) {
    std::filesystem::create_directories(dir_);
  }
  ~DataCli() override { std::filesystem::remove_all(dir_); }

  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  // Writes `text` to file `name` of the directory; returns its path.
  std::string write(const std::string& name, const std::string& text) const {
    std::ofstream(path(name), std::ios::binary) << text;
    return path(name);
  }

  // Runs `sprig data <args>`.
  CliRun sprig_data(const std::string& args) const {
    return sprig::testing::run_sprig("data " + args, dir_.string());
  }

  // The JSON objects of file `name`, one per line.
  std::vector<nlohmann::json> read_jsonl(const std::string& name) const {
    std::vector<nlohmann::json> objects;
    std::ifstream in(path(name));
    for (std::string line; std::getline(in, line);) objects.push_back(nlohmann::json::parse(line));
    return objects;
  }

  // `sprig data pack` of `input` into out.jsonl (replacing an earlier one), which must succeed;
  // returns the rows and sets `summary` to what the command printed.
  std::vector<nlohmann::json> pack(const std::string& input, const std::string& mode,
                                   int64_t seq_len, const std::string& extra_args,
                                   std::string& summary) const {
    const CliRun r = sprig_data("pack --input " + input + " --mode " + mode + " --seq-len " +
                                std::to_string(seq_len) + " --out " + path("out.jsonl") +
                                " --overwrite " + extra_args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    summary = r.out;
    return read_jsonl("out.jsonl");
  }

  std::filesystem::path dir_;
};

}  // namespace sprig::data::testing
