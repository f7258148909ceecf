// Runs the real `sprig` executable (SPRIG_BIN, compiled into the test binary) with its stdout
// and stderr captured in files of a directory: the end-to-end tests of every subcommand use it.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <iterator>
#include <string>

#include "tests/child_process.h"

namespace sprig::testing {

struct CliRun {
  int exit_code = -1;  // -1: killed by a signal or stopped at the time limit
  std::string out, err;
};

inline std::string file_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// How long one command of an end-to-end test may run: below the test's own limit
// (tests/CMakeLists.txt: 120 s, 900 s for a test labelled slow), so a hung command fails its test
// by name.
inline constexpr std::chrono::seconds kCommandLimit{100}, kSlowCommandLimit{600};

// `sprig <args>`, run in the shell (in the directory `cwd` when given) with stdout and stderr
// going to files under `dir`, for at most `limit`: past it the command is killed and the test
// fails naming it.
inline CliRun run_sprig(const std::string& args, const std::string& dir,
                        const std::string& cwd = "", std::chrono::seconds limit = kCommandLimit) {
  const std::string out = dir + "/stdout.txt", err = dir + "/stderr.txt";
  const std::string command = SPRIG_BIN " " + args;
  ChildProcess child = ChildProcess::shell("exec " + command + " >" + out + " 2>" + err, cwd);
  const std::optional<int> status = child.wait_for(limit);
  if (!status) ADD_FAILURE() << "timed out after " << limit.count() << " s: " << command;
  return {status && *status >= 0 ? *status : -1, file_text(out), file_text(err)};
}

}  // namespace sprig::testing
