// Helpers shared by the libFuzzer targets: the one rule for what counts as a rejection, and a
// per-process scratch file for parsers that read paths.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <string>

namespace sprig::fuzz {

// Runs `parse`; an exception with a message is the parser rejecting the input, anything else
// (a crash, a sanitizer report, an exception without a message) is a finding.
template <class Parse> void expect_parse_or_reject(Parse parse) {
  try {
    parse();
  } catch (const std::exception& e) {
    if (e.what() == nullptr || e.what()[0] == '\0') std::abort();
  }
}

// Writes the bytes to this process's scratch file (rewritten on every input) and returns its
// path.
inline const std::string& scratch_file(const uint8_t* data, size_t size, const char* suffix) {
  static const std::string path = (std::filesystem::temp_directory_path() /
                                   ("sprig_fuzz_" + std::to_string(::getpid()) + suffix))
                                      .string();
  static const bool cleanup = [] { return std::atexit([] { std::remove(path.c_str()); }) == 0; }();
  (void)cleanup;
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr || (size > 0 && std::fwrite(data, 1, size, f) != size) || std::fclose(f) != 0)
    std::abort();
  return path;
}

}  // namespace sprig::fuzz
