#include "train/run_directory.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>

namespace sprig {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr const char* kMarkerTag = "run directory";  // the marker's "sprig" value

json read_json(const fs::path& file) {
  std::ifstream in(file);
  return json::parse(in, nullptr, /*allow_exceptions=*/false);
}

bool is_sprig_run(const fs::path& dir) {
  const json marker = read_json(dir / kRunMarker);
  return marker.is_object() && marker.value("sprig", "") == kMarkerTag;
}

std::string host_name() {
  char name[256] = {};
  return ::gethostname(name, sizeof(name) - 1) == 0 ? name : "?";
}

// Writes `text` as the whole content of the open file `fd`.
bool write_all(int fd, const std::string& text) {
  return ::ftruncate(fd, 0) == 0 &&
         ::pwrite(fd, text.data(), text.size(), 0) == static_cast<ssize_t>(text.size());
}

}  // namespace

RunDirectory::RunDirectory(const std::string& dir) {
  fs::path path = fs::absolute(dir).lexically_normal();
  if (!path.has_filename()) path = path.parent_path();
  lock_ = path / kRunLock;
  marker_ = path / kRunMarker;
  if (fs::is_directory(path) && !fs::is_empty(path) && !is_sprig_run(path))
    throw std::runtime_error("run_dir " + dir + " is not empty and is not a sprig run directory (" +
                             "it holds no " + kRunMarker +
                             "): choose a new or empty directory, or move its content away");
  // Created one level at a time, so that only what this process made is removed on failure.
  fs::path prefix;
  for (const fs::path& part : path) {
    prefix /= part;
    std::error_code error;
    if (fs::create_directory(prefix, error) && created_.empty()) created_ = prefix;
    if (error) throw std::runtime_error("run_dir " + dir + " is not writable: " + error.message());
  }
  const auto fail = [&](const std::string& what) {
    const std::string why = std::strerror(errno);
    release();
    throw std::runtime_error("run_dir " + dir + ": cannot " + what + ": " + why);
  };
  for (;;) {
    const int fd = ::open(lock_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) fail("open " + lock_.string());
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      const json holder = read_json(lock_);
      ::close(fd);
      const std::string who =
          holder.is_object() && holder.contains("pid")
              ? "pid " + holder["pid"].dump() + " on host " + holder.value("host", "?")
              : "a process starting now";
      // Nothing is removed: what this process created, the holder now uses.
      throw std::runtime_error("run_dir " + dir + " is in use by another sprig run (" + who +
                               "): wait for it to end, or choose another run_dir");
    }
    // The holder removes the lock file when it ends: the file locked must still be the one named.
    struct stat locked {
    }, named{};
    if (::fstat(fd, &locked) == 0 && ::stat(lock_.c_str(), &named) == 0 &&
        locked.st_dev == named.st_dev && locked.st_ino == named.st_ino) {
      fd_ = fd;
      break;
    }
    ::close(fd);
  }
  if (!write_all(fd_, json{{"pid", ::getpid()}, {"host", host_name()}}.dump() + "\n"))
    fail("write " + lock_.string());
  const int marker = ::open(marker_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (marker < 0 && errno != EEXIST) fail("create " + marker_.string());
  if (marker >= 0) {
    created_marker_ = true;
    const bool written = write_all(marker, json{{"sprig", kMarkerTag}}.dump() + "\n");
    ::close(marker);
    if (!written) fail("write " + marker_.string());
  }
}

RunDirectory::~RunDirectory() { release(); }

void RunDirectory::release() {
  std::error_code ignored;
  if (!kept_) {
    if (!created_.empty())
      fs::remove_all(created_, ignored);
    else if (created_marker_)
      fs::remove(marker_, ignored);
  }
  if (fd_ < 0) return;
  fs::remove(lock_, ignored);  // before the lock is released: no one takes a file being removed
  ::close(fd_);
  fd_ = -1;
}

}  // namespace sprig
