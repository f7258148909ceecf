// Runs the real `sprig` executable (SPRIG_BIN, compiled into the test binary) with its stdout
// and stderr captured in files of a directory: the end-to-end tests of every subcommand use it.
#pragma once

#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>

namespace sprig::testing {

struct CliRun {
  int exit_code = -1;  // -1: killed by a signal
  std::string out, err;
};

inline std::string file_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// `sprig <args>`, run in the shell (in the directory `cwd` when given) with stdout and stderr
// going to files under `dir`.
inline CliRun run_sprig(const std::string& args, const std::string& dir,
                        const std::string& cwd = "") {
  const std::string out = dir + "/stdout.txt", err = dir + "/stderr.txt";
  const std::string cd = cwd.empty() ? "" : "cd '" + cwd + "' && ";
  const int status = std::system((cd + SPRIG_BIN + " " + args + " >" + out + " 2>" + err).c_str());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, file_text(out), file_text(err)};
}

}  // namespace sprig::testing
