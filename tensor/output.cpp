#include "tensor/output.h"

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <stdexcept>

namespace sprig {

namespace fs = std::filesystem;

namespace {

// The target as an absolute path without a trailing separator ("out/" is "out").
fs::path target_of(const std::string& path) {
  fs::path p = fs::absolute(path).lexically_normal();
  return p.has_filename() ? p : p.parent_path();
}

fs::path sibling(const fs::path& target, const char* tag) {
  return target.parent_path() /
         ("." + target.filename().string() + tag + std::to_string(::getpid()));
}

// Whether `p` is `dir` or lies under it (both canonical).
bool is_within(const fs::path& p, const fs::path& dir) {
  auto [end, unused] = std::mismatch(dir.begin(), dir.end(), p.begin(), p.end());
  return end == dir.end();
}

bool starts_with_safetensors_header(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  char head[9];
  return in.read(head, 9) && head[8] == '{';
}

}  // namespace

const OutputKind kSafetensorsOutput{"safetensors file", false, starts_with_safetensors_header};

void check_output(const std::string& path, const OutputKind& kind, bool overwrite,
                  const std::string& option) {
  const std::string where = "[" + option + "] ";
  if (path.empty()) throw std::invalid_argument(where + "the output path is empty");
  const fs::path target = target_of(path);
  if (!fs::is_directory(target.parent_path()))
    throw std::runtime_error(where + path + ": the directory " + target.parent_path().string() +
                             " does not exist");
  if (!fs::exists(target)) return;
  const std::string replace_hint = overwrite ? "" : ", or give --overwrite to replace it";
  if (kind.directory) {
    if (!fs::is_directory(target))
      throw std::runtime_error(where + path + " is a file, not a directory: choose a directory");
    if (is_within(fs::current_path(), fs::canonical(target)))
      throw std::runtime_error(where + path +
                               " is or holds the current directory: choose another directory");
    if (fs::is_empty(target)) return;
    if (!overwrite)
      throw std::runtime_error(
          where + path + " already exists and is not empty: choose a new directory" + replace_hint);
  } else {
    if (fs::is_directory(target))
      throw std::runtime_error(where + path + " is a directory, not a file: choose a file name");
    if (!fs::is_regular_file(target))
      throw std::runtime_error(where + path + " exists and is not a regular file");
    if (fs::file_size(target) == 0) return;
    if (!overwrite)
      throw std::runtime_error(where + path + " already exists: choose another name" +
                               replace_hint);
  }
  if (!kind.recognises(target))
    throw std::runtime_error(where + path + " is not a " + kind.name +
                             " that sprig wrote: refusing to replace it, even with --overwrite");
}

Output::Output(std::string path, const OutputKind& kind, bool overwrite, std::string option)
    : path_(std::move(path)), kind_(kind), overwrite_(overwrite), option_(std::move(option)) {
  check_output(path_, kind_, overwrite_, option_);
  const fs::path target = target_of(path_);
  temp_ = sibling(target, ".tmp-").string();
  fs::remove_all(temp_);
  if (kind_.directory) fs::create_directory(temp_);
}

Output::~Output() {
  if (committed_) return;
  std::error_code ignored;
  fs::remove_all(temp_, ignored);
}

void Output::commit() {
  check_output(path_, kind_, overwrite_, option_);  // nothing appeared there meanwhile
  const fs::path target = target_of(path_);
  if (kind_.directory && fs::exists(target)) {
    // rename(2) cannot replace a non-empty directory: move the earlier output aside, and back if
    // the new one cannot take its place.
    const fs::path old = sibling(target, ".old-");
    fs::rename(target, old);
    try {
      fs::rename(temp_, target);
    } catch (...) {
      fs::rename(old, target);
      throw;
    }
    fs::remove_all(old);
  } else {
    fs::rename(temp_, target);  // a file replaces an earlier one atomically
  }
  committed_ = true;
}

}  // namespace sprig
