// Output files and directories that never destroy what a user has (docs/architecture.md §7).
//
// An Output is made before any work, and checks its target at once: the parent directory must
// exist, and nothing may be at the target (an empty file or an empty directory counts as nothing)
// unless `overwrite` is given and what is there is recognisably an earlier output of the same
// kind. The content goes to a sibling temporary name, temp(); commit() renames it into place, and
// only then is an existing target replaced. An Output destroyed without commit() removes its
// temporary, so a command that fails leaves the target exactly as it was.
#pragma once

#include <filesystem>
#include <string>

namespace sprig {

// What is written: a file or a directory, and how to recognise an earlier output of the kind (the
// only thing `overwrite` may replace). Each layer defines the kinds it writes.
struct OutputKind {
  const char* name;  // in messages: "safetensors file", "checkpoint directory", ...
  bool directory;
  bool (*recognises)(const std::filesystem::path& existing);
};

// A file that starts with a safetensors header (8-byte length, then '{').
extern const OutputKind kSafetensorsOutput;

class Output {
 public:
  // `option` names the flag the path came from ("--out"), for the messages.
  Output(std::string path, const OutputKind& kind, bool overwrite = false,
         std::string option = "--out");
  Output(const Output&) = delete;
  Output& operator=(const Output&) = delete;
  ~Output();

  const std::string& path() const { return path_; }
  // The temporary to fill: a file path (not yet created), or a directory already created.
  const std::string& temp() const { return temp_; }
  // Moves the temporary into place, replacing an earlier output when `overwrite` allowed it.
  void commit();

 private:
  std::string path_;
  const OutputKind& kind_;
  bool overwrite_;
  std::string option_, temp_;
  bool committed_ = false;
};

// The checks Output's constructor makes, alone: for commands that load their inputs first and
// want a bad output path reported before that work.
void check_output(const std::string& path, const OutputKind& kind, bool overwrite = false,
                  const std::string& option = "--out");

}  // namespace sprig
