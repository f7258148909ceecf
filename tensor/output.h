// Output files and directories that never destroy what a user has (docs/architecture.md §7).
//
// An Output is made before any work, and checks its target at once: it may not be, lie inside or
// hold one of the command's inputs (by path, or the same file through a link), nor share a path
// with another uncommitted Output of the process, even with `overwrite`; the parent directory must
// exist, and nothing may be at the target (an empty file or an empty directory counts as nothing)
// unless `overwrite` is given and what is there is recognisably an earlier output of the same
// kind, written by the same command where the format records it (kOutputKey). The content goes to
// a sibling temporary name, temp(), made at once (an empty file or directory: a place where
// nothing can be created is refused before any work); commit() renames it into place, and only then
// is an existing target replaced. A symbolic link at the target (dangling or not) is replaced only
// with `overwrite`, as a link: what it points to stays, and commit() says so on stderr. An Output
// destroyed without commit() removes its temporary, so a command that fails leaves the target
// exactly as it was; so does a command ended by SIGINT or SIGTERM (unless it handles them itself).
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace sprig {

// The key of safetensors `__metadata__` naming the command kind that wrote the file.
inline constexpr const char* kOutputKey = "sprig.output";

// What is written: a file or a directory, the command kind it records, and how to recognise an
// earlier output of the kind (the only thing `overwrite` may replace). Each layer defines the
// kinds it writes.
struct OutputKind {
  const char* name;     // in messages: "safetensors file", "checkpoint directory", ...
  const char* command;  // recorded under kOutputKey ("score", ...); nullptr: the format has no room
  bool directory;
  // "" when `existing` is an earlier output of `kind`, else why not, as the rest of a sentence
  // that starts with its path ("is not a PNG that sprig wrote").
  std::string (*refuses)(const std::filesystem::path& existing, const OutputKind& kind);
};

// A safetensors file whose metadata records `command` under kOutputKey.
OutputKind safetensors_output(const char* command);

// Why a file with `metadata` (std::nullopt: none could be read) is not an earlier output of
// `kind`, "" when it is: its kOutputKey must be kind.command. For kinds' `refuses`.
std::string refuses_metadata(const std::optional<std::map<std::string, std::string>>& metadata,
                             const OutputKind& kind);

// A path the command reads, named as the messages name it (its option, such as "--model"): a
// file, or a directory whose content it reads (nothing may be written inside).
struct InputPath {
  std::string option, path;
  bool directory = false;
};

class Output {
 public:
  // `option` names the flag the path came from ("--out"), for the messages; `inputs` are what the
  // command reads.
  Output(std::string path, OutputKind kind, bool overwrite = false, std::string option = "--out",
         std::vector<InputPath> inputs = {});
  Output(const Output&) = delete;
  Output& operator=(const Output&) = delete;
  ~Output();

  const std::string& path() const { return path_; }
  // The temporary to fill: a file path (not yet created), or a directory already created.
  const std::string& temp() const { return temp_; }
  // What a safetensors writer records: {kOutputKey: the kind's command}.
  std::map<std::string, std::string> metadata() const;
  // Moves the temporary into place, replacing an earlier output when `overwrite` allowed it.
  void commit();

 private:
  void retire();  // leaves the Outputs alive in the process

  std::string path_;
  OutputKind kind_;
  bool overwrite_;
  std::string option_;
  std::vector<InputPath> inputs_;
  std::string temp_;
  int signal_slot_ = -1;  // where SIGINT and SIGTERM find temp_ to remove it
  bool committed_ = false;
};

// The checks Output's constructor makes, except against other Outputs: for commands that load
// their inputs first and want a bad output path reported before that work.
void check_output(const std::string& path, const OutputKind& kind, bool overwrite = false,
                  const std::string& option = "--out", const std::vector<InputPath>& inputs = {});

}  // namespace sprig
