// The one way a test starts another process (`sprig`, `mpirun`, a shell command): the child runs
// in its own process group, dies with the test process (PR_SET_PDEATHSIG), and its whole group is
// killed and reaped when the ChildProcess goes out of scope, whether the test passed, failed or
// returned early from an ASSERT. Waits are always bounded, so a hung child is a named failure.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

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

// The state letter and process group of process `pid` from /proc/<pid>/stat ('\0' when it is
// gone).
inline std::pair<char, pid_t> process_state(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return {'\0', 0};
  const size_t close = line.rfind(')');  // "pid (comm) state ppid pgrp ..."
  if (close == std::string::npos) return {'\0', 0};
  std::istringstream rest(line.substr(close + 1));
  char state = '\0';
  pid_t parent = 0, group = 0;
  rest >> state >> parent >> group;
  return {state, group};
}

// Whether process `pid` exists and is not a zombie.
inline bool process_alive(pid_t pid) {
  const char state = process_state(pid).first;
  return state != '\0' && state != 'Z' && state != 'X';
}

// Whether a process of group `pgid` exists and is not a zombie.
inline bool group_alive(pid_t pgid) {
  std::error_code ec;
  for (std::filesystem::directory_iterator it("/proc", ec), end; !ec && it != end;
       it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    const auto [state, group] = process_state(std::stoi(name));
    if (group == pgid && state != '\0' && state != 'Z' && state != 'X') return true;
  }
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

  // Kills the whole group (SIGKILL), reaps the child and waits (at most 10 s) until no process of
  // the group runs any more: SIGKILL is delivered asynchronously.
  ~ChildProcess() {
    if (pid_ <= 0) return;
    ::kill(-pid_, SIGKILL);
    if (!status_) ::waitpid(pid_, nullptr, 0);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (group_alive(pid_) && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }

  pid_t pid() const { return pid_; }

  // Sends `sig` to the child alone.
  void signal(int sig) const { ::kill(pid_, sig); }

  // Whether the child has ended; then `status` is its exit status, or -signal.
  bool exited(int& status) {
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
