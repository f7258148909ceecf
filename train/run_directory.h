// The run directory a training run owns (docs/architecture.md §6). It is sprig's when it holds the
// marker sprig-run.json, written when a run first takes the directory, or, as sprig versions
// before the marker left them, config.resolved.yaml, metrics.jsonl and checkpoints/. A run holds
// an exclusive lock (flock) on sprig-run.lock, which names its pid and host, for its whole length,
// so a second run in the same directory is refused with the holder's name; the lock file is
// removed when the run ends.
#pragma once

#include <filesystem>
#include <string>

namespace sprig {

// The marker's and the lock's names inside a run directory.
inline constexpr const char* kRunMarker = "sprig-run.json";
inline constexpr const char* kRunLock = "sprig-run.lock";

class RunDirectory {
 public:
  // Refuses a `dir` that is neither missing, empty nor sprig's, creates it when missing, takes its
  // lock, refusing while another process holds it ("run_dir <dir> is in use by another sprig run
  // (pid <pid> on host <host>): ..."), and writes the marker when it is missing.
  explicit RunDirectory(const std::string& dir);
  RunDirectory(const RunDirectory&) = delete;
  RunDirectory& operator=(const RunDirectory&) = delete;
  // Releases the lock; unless keep() was called, removes what the constructor created (the
  // directory, or the marker), so a run that cannot start leaves the directory as it found it.
  ~RunDirectory();

  // The run has written the directory: it and its marker stay.
  void keep() { kept_ = true; }

 private:
  void release();  // what the destructor does

  std::filesystem::path lock_, marker_;
  std::filesystem::path created_;  // the outermost directory the constructor created ("": none)
  bool created_marker_ = false;
  bool kept_ = false;
  int fd_ = -1;  // the lock file, locked
};

}  // namespace sprig
