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
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace sprig::testing {

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

  // Kills the whole group (SIGKILL) and reaps the child.
  ~ChildProcess() {
    if (pid_ <= 0) return;
    ::kill(-pid_, SIGKILL);
    if (!status_) ::waitpid(pid_, nullptr, 0);
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

// Whether process `pid` exists and is not a zombie.
inline bool process_alive(pid_t pid) {
  if (::kill(pid, 0) != 0) return false;
  FILE* stat = std::fopen(("/proc/" + std::to_string(pid) + "/stat").c_str(), "r");
  if (!stat) return false;
  char line[512] = {};
  const size_t n = std::fread(line, 1, sizeof line - 1, stat);
  std::fclose(stat);
  const std::string text(line, n);
  const size_t close = text.rfind(')');  // "pid (comm) state ..."
  return close == std::string::npos || close + 2 >= text.size() || text[close + 2] != 'Z';
}

}  // namespace sprig::testing
