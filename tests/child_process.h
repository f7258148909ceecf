// The one way a test starts another process (`sprig`, `mpirun`, a shell command): the child runs
// in its own process group and dies with the test process (PR_SET_PDEATHSIG); its whole group and
// every process descended from it (mpirun's ranks, in groups of their own) are killed, and the
// child reaped, when the ChildProcess goes out of scope, whether the test passed, failed or
// returned early from an ASSERT. Waits on a running child are bounded, so a hung child is a named
// failure.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace sprig::testing {

// What /proc/<pid>/stat says of a process: its state letter ('\0' when it is gone), parent and
// process group.
struct ProcessState {
  char state = '\0';
  pid_t parent = 0, group = 0;
  bool running() const { return state != '\0' && state != 'Z' && state != 'X'; }
};

inline ProcessState process_state(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  ProcessState s;
  if (!std::getline(stat, line)) return s;
  const size_t close = line.rfind(')');  // "pid (comm) state ppid pgrp ..."
  if (close == std::string::npos) return s;
  std::istringstream(line.substr(close + 1)) >> s.state >> s.parent >> s.group;
  return s;
}

// Every process of the system, with its state.
inline std::vector<std::pair<pid_t, ProcessState>> all_processes() {
  std::vector<std::pair<pid_t, ProcessState>> out;
  std::error_code ec;
  for (std::filesystem::directory_iterator it("/proc", ec), end; !ec && it != end;
       it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    const pid_t pid = std::stoi(name);
    out.emplace_back(pid, process_state(pid));
  }
  return out;
}

// Whether process `pid` exists and is not a zombie.
inline bool process_alive(pid_t pid) { return process_state(pid).running(); }

// The processes descended from `pid` (children, theirs, ...), whatever their process group: a
// launcher such as mpirun puts each rank in a group of its own.
inline std::vector<pid_t> descendants(pid_t pid) {
  const std::vector<std::pair<pid_t, ProcessState>> processes = all_processes();
  std::vector<pid_t> out = {pid};
  for (size_t i = 0; i < out.size(); ++i)
    for (const auto& [p, s] : processes)
      if (s.parent == out[i]) out.push_back(p);
  out.erase(out.begin());
  return out;
}

// Whether a process of group `pgid`, or one of `pids`, runs (exists and is not a zombie).
inline bool any_running(pid_t pgid, const std::vector<pid_t>& pids) {
  for (const auto& [p, s] : all_processes())
    if (s.running() && (s.group == pgid || std::find(pids.begin(), pids.end(), p) != pids.end()))
      return true;
  return false;
}

class ChildProcess {
 public:
  // Starts `argv` (argv[0] a path) with stdout and stderr appended to `log` (inherited when
  // empty), in the directory `cwd` when given.
  ChildProcess(std::vector<std::string> argv, const std::string& log = "",
               const std::string& cwd = "") {
    std::vector<char*> args;
    for (std::string& a : argv) args.push_back(a.data());
    args.push_back(nullptr);
    const pid_t parent = ::getpid();
    pid_ = ::fork();
    if (pid_ < 0) throw std::runtime_error("fork failed for " + argv.at(0));
    if (pid_ == 0) {  // only async-signal-safe calls until exec (the parent may have threads)
      ::setpgid(0, 0);
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(127);  // the test died before the line above
      if (!cwd.empty() && ::chdir(cwd.c_str()) != 0) ::_exit(127);
      if (!log.empty()) {
        const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (fd < 0) ::_exit(127);
        ::dup2(fd, 1);
        ::dup2(fd, 2);
      }
      ::execv(args[0], args.data());
      ::_exit(127);
    }
    ::setpgid(pid_, pid_);  // also here, so the group exists whichever side runs first
  }

  // `/bin/sh -c command`: redirections and pipes in `command` ("exec " in front keeps one
  // process).
  static ChildProcess shell(const std::string& command, const std::string& cwd = "") {
    return ChildProcess({"/bin/sh", "-c", command}, "", cwd);
  }

  ChildProcess(ChildProcess&& other) noexcept
      : pid_(std::exchange(other.pid_, -1)), status_(other.status_) {}
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;
  ChildProcess& operator=(ChildProcess&&) = delete;

  // Kills (SIGKILL) the child's group and every process descended from it (mpirun's ranks have
  // groups of their own), reaps the child and waits, at most 10 s, until none of them runs:
  // SIGKILL is delivered asynchronously.
  ~ChildProcess() {
    if (pid_ <= 0) return;
    const std::vector<pid_t> tree = descendants(pid_);  // before the kill re-parents them
    if (!status_ || any_running(pid_, {})) ::kill(-pid_, SIGKILL);
    for (const pid_t p : tree) ::kill(p, SIGKILL);
    if (!status_) ::waitpid(pid_, nullptr, 0);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (any_running(pid_, tree) && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }

  pid_t pid() const { return pid_; }

  // Sends `sig` to the child alone.
  void signal(int sig) const {
    if (pid_ > 0) ::kill(pid_, sig);
  }

  // Whether the child has ended; then `status` is its exit status, or -signal.
  bool exited(int& status) {
    if (pid_ <= 0) return false;
    if (!status_) {
      int raw = 0;
      if (::waitpid(pid_, &raw, WNOHANG) != pid_) return false;
      status_ = WIFEXITED(raw) ? WEXITSTATUS(raw) : -WTERMSIG(raw);
    }
    status = *status_;
    return true;
  }

  // Waits at most `limit` for the child to end: its exit status (or -signal), or nothing when
  // the limit passed (the child keeps running until the destructor kills it).
  std::optional<int> wait_for(std::chrono::milliseconds limit) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    for (int status = 0;;) {
      if (exited(status)) return status;
      if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }

 private:
  pid_t pid_ = -1;
  std::optional<int> status_;  // set once reaped
};

}  // namespace sprig::testing
