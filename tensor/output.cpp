#include "tensor/output.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstring>
#include <iostream>
#include <mutex>
#include <stdexcept>

#include "tensor/safetensors.h"

namespace sprig {

namespace fs = std::filesystem;

namespace {

// The target as an absolute path without a trailing separator ("out/" is "out").
fs::path target_of(const std::string& path) {
  fs::path p = fs::absolute(path).lexically_normal();
  return p.has_filename() ? p : p.parent_path();
}

fs::path sibling(const fs::path& target, const char* tag) {
  std::string name = ".";
  name += target.filename().string();
  name += tag;
  name += std::to_string(::getpid());
  return target.parent_path() / name;
}

// Whether `p` is `dir` or lies under it (both canonical).
bool is_within(const fs::path& p, const fs::path& dir) {
  auto [end, unused] = std::mismatch(dir.begin(), dir.end(), p.begin(), p.end());
  return end == dir.end();
}

// A path as the filesystem resolves it (symbolic links followed), with the identity (device and
// inode) of what is there, so that two names of one file through a hard link compare equal.
struct Resolved {
  fs::path path;
  bool exists = false, directory = false;
  dev_t device = 0;
  ino_t inode = 0;

  explicit Resolved(const std::string& given) {
    std::error_code error;
    path = fs::weakly_canonical(target_of(given), error);
    if (error) path = target_of(given);
    if (!path.has_filename()) path = path.parent_path();
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) return;
    exists = true;
    directory = S_ISDIR(st.st_mode);
    device = st.st_dev;
    inode = st.st_ino;
  }
  bool same_as(const Resolved& other) const {
    return path == other.path ||
           (exists && other.exists && device == other.device && inode == other.inode);
  }
};

// Refuses an output `path` that is `other_path` (named `other_option`), lies inside it when it is
// a directory read or written whole, or holds it: `why` ends the sentence.
void check_apart(const std::string& where, const std::string& path, const std::string& other_option,
                 const std::string& other_path, bool other_directory, const std::string& why) {
  const Resolved out(path), other(other_path);
  std::string relation;
  if (out.same_as(other))
    relation = target_of(path) == target_of(other_path)
                   ? "is also " + other_option
                   : "is the same " + std::string(other.directory ? "directory" : "file") + " as " +
                         other_option + " " + other_path;
  else if (other_directory && is_within(out.path, other.path))
    relation = "lies inside " + other_option + " " + other_path;
  else if (is_within(other.path, out.path))
    relation = "holds " + other_option + " " + other_path;
  if (!relation.empty()) throw std::runtime_error(where + path + " " + relation + ": " + why);
}

std::string refuses_safetensors(const fs::path& existing, const OutputKind& kind) {
  return refuses_metadata(safetensors_metadata(existing.string()), kind);
}

// The Outputs alive in this process: a command's outputs may not share a path.
std::mutex live_mutex;
std::vector<const Output*> live_outputs;

// ---- SIGINT and SIGTERM: the live temporaries go before the process ends ---------------------
// A process that has the default action for a signal when its first Output is made gets a
// handler that removes every live temporary, then ends the process by the default action (exit
// status 128 + signal). A handler may only make async-signal-safe calls, so the temporaries are
// kept as C strings in fixed slots, each published by its flag; a directory's files (one level:
// what the writers put there) are unlinked before the directory.
struct TempSlot {
  char path[PATH_MAX];
  bool directory;
};
constexpr int kTempSlots = 32;
TempSlot temp_slots[kTempSlots];
std::atomic<bool> temp_slot_used[kTempSlots];
struct sigaction previous_action[2];  // SIGINT's and SIGTERM's before the handler

struct linux_dirent64 {
  uint64_t d_ino;
  int64_t d_off;
  unsigned short d_reclen;
  unsigned char d_type;
  char d_name[];
};

void remove_temp(const TempSlot& slot) {
  if (!slot.directory) {
    ::unlink(slot.path);
    return;
  }
  const int fd = ::open(slot.path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  alignas(linux_dirent64) char buffer[4096];
  for (bool removed = true; removed;) {  // entries removed while listed may hide others: again
    removed = false;
    ::lseek(fd, 0, SEEK_SET);
    for (long n; (n = ::syscall(SYS_getdents64, fd, buffer, sizeof buffer)) > 0;)
      for (long at = 0; at < n;) {
        const auto* entry = reinterpret_cast<const linux_dirent64*>(buffer + at);
        at += entry->d_reclen;
        const char* name = entry->d_name;
        if (name[0] == '.' && (name[1] == '\0' || (name[1] == '.' && name[2] == '\0'))) continue;
        removed |= ::unlinkat(fd, name, 0) == 0;
      }
  }
  ::close(fd);
  ::rmdir(slot.path);
}

void remove_temps_and_end(int sig) {
  for (int i = 0; i < kTempSlots; ++i)
    if (temp_slot_used[i]) remove_temp(temp_slots[i]);
  ::sigaction(sig, &previous_action[sig == SIGINT ? 0 : 1], nullptr);
  ::raise(sig);  // delivered with the default action once this handler returns
}

void install_signal_cleanup() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction action {};
    action.sa_handler = remove_temps_and_end;
    sigemptyset(&action.sa_mask);
    sigaddset(&action.sa_mask, SIGINT);
    sigaddset(&action.sa_mask, SIGTERM);
    const int signals[2] = {SIGINT, SIGTERM};
    for (int i = 0; i < 2; ++i) {
      // A program that handles or ignores the signal itself keeps its own action.
      if (::sigaction(signals[i], nullptr, &previous_action[i]) != 0 ||
          (previous_action[i].sa_flags & SA_SIGINFO) || previous_action[i].sa_handler != SIG_DFL)
        continue;
      ::sigaction(signals[i], &action, nullptr);
    }
  });
}

// The slot that publishes `temp` to the handler (-1: every slot is taken; it is then not removed
// on a signal).
int publish_temp(const std::string& temp, bool directory) {
  install_signal_cleanup();
  if (temp.size() >= PATH_MAX) return -1;
  for (int i = 0; i < kTempSlots; ++i)
    if (!temp_slot_used[i]) {
      std::memcpy(temp_slots[i].path, temp.c_str(), temp.size() + 1);
      temp_slots[i].directory = directory;
      temp_slot_used[i] = true;  // last: the handler reads only a complete slot
      return i;
    }
  return -1;
}

void withdraw_temp(int slot) {
  if (slot >= 0) temp_slot_used[slot] = false;
}

}  // namespace

OutputKind safetensors_output(const char* command) {
  return {"safetensors file", command, false, refuses_safetensors};
}

std::string refuses_metadata(const std::optional<std::map<std::string, std::string>>& metadata,
                             const OutputKind& kind) {
  if (!metadata) return "is not a " + std::string(kind.name) + " that sprig wrote";
  const auto it = metadata->find(kOutputKey);
  if (it == metadata->end())
    return "is a " + std::string(kind.name) + " that sprig did not write (its metadata has no \"" +
           kOutputKey + "\")";
  if (it->second != kind.command)
    return "is the output of sprig " + it->second + ", not of sprig " + kind.command +
           " (its metadata's \"" + kOutputKey + "\")";
  return "";
}

void check_output(const std::string& path, const OutputKind& kind, bool overwrite,
                  const std::string& option, const std::vector<InputPath>& inputs) {
  const std::string where = "[" + option + "] ";
  if (path.empty()) throw std::invalid_argument(where + "the output path is empty");
  for (const InputPath& input : inputs)
    if (!input.path.empty())
      check_apart(where, path, input.option, input.path, input.directory,
                  "an output never replaces or enters one of the command's inputs, even with "
                  "--overwrite; choose another path");
  const fs::path target = target_of(path);
  if (!fs::is_directory(target.parent_path()))
    throw std::runtime_error(where + path + ": the directory " + target.parent_path().string() +
                             " does not exist");
  if (access(target.parent_path().c_str(), W_OK | X_OK) != 0)
    throw std::runtime_error(where + path + ": cannot write in " + target.parent_path().string() +
                             " (" + std::strerror(errno) + ")");
  // A symbolic link (dangling or not) is the user's: replaced, as a link, only on request.
  if (fs::is_symlink(target)) {
    if (!overwrite)
      throw std::runtime_error(where + path + " is a symbolic link to " +
                               fs::read_symlink(target).string() +
                               ": choose another name, or give --overwrite to replace the link "
                               "(what it points to stays as it is)");
    return;
  }
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
  const std::string why = kind.refuses(target, kind);
  if (!why.empty())
    throw std::runtime_error(where + path + " " + why +
                             ": refusing to replace it, even with --overwrite");
}

Output::Output(std::string path, OutputKind kind, bool overwrite, std::string option,
               std::vector<InputPath> inputs)
    : path_(std::move(path)),
      kind_(kind),
      overwrite_(overwrite),
      option_(std::move(option)),
      inputs_(std::move(inputs)) {
  check_output(path_, kind_, overwrite_, option_, inputs_);
  const std::lock_guard<std::mutex> lock(live_mutex);
  for (const Output* other : live_outputs)
    check_apart("[" + option_ + "] ", path_, other->option_, other->path_, other->kind_.directory,
                "give each output a path of its own");
  const fs::path target = target_of(path_);
  temp_ = sibling(target, ".tmp-").string();
  // The temporary is made now (an empty file, for a file output), so a place where nothing can be
  // created (/proc, a read-only file system, even as root) is found before any work.
  std::string why;
  try {
    fs::remove_all(temp_);
    if (kind_.directory) fs::create_directory(temp_);
  } catch (const fs::filesystem_error& e) {
    why = e.code().message();
  }
  if (!kind_.directory && why.empty()) {
    const int fd = ::open(temp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
      why = std::strerror(errno);
    else
      ::close(fd);
  }
  if (!why.empty())
    throw std::runtime_error("[" + option_ + "] " + path_ + ": cannot create " + temp_ + " (" +
                             why + ")");
  live_outputs.push_back(this);  // last: a constructor that throws leaves no entry
  signal_slot_ = publish_temp(temp_, kind_.directory);
}

// A committed Output is done: a later one may replace it.
void Output::retire() {
  const std::lock_guard<std::mutex> lock(live_mutex);
  live_outputs.erase(std::find(live_outputs.begin(), live_outputs.end(), this));
  withdraw_temp(signal_slot_);
  signal_slot_ = -1;
}

Output::~Output() {
  if (committed_) return;
  std::error_code ignored;
  fs::remove_all(temp_, ignored);
  retire();  // after: a signal meanwhile finds the temporary still published
}

std::map<std::string, std::string> Output::metadata() const {
  if (!kind_.command) return {};
  return {{kOutputKey, kind_.command}};
}

void Output::commit() {
  check_output(path_, kind_, overwrite_, option_, inputs_);  // nothing appeared there meanwhile
  const fs::path target = target_of(path_);
  const bool link = fs::is_symlink(target);
  const std::string linked = link ? fs::read_symlink(target).string() : "";
  if (kind_.directory && fs::exists(fs::symlink_status(target))) {
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
  retire();
  committed_ = true;
  if (link)
    std::cerr << "sprig: [" << option_ << "] " << path_ << " was a symbolic link to " << linked
              << ": the link is replaced, " << linked << " stays as it was\n";
}

}  // namespace sprig
