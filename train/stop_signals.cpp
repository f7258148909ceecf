#include "train/stop_signals.h"

#include <signal.h>

#include <atomic>

namespace sprig {

namespace {

// The signal that asked the loop to stop (0: none). A lock-free atomic: the handler may touch
// nothing else (async-signal-safety).
std::atomic<int> stop_signal{0};
static_assert(std::atomic<int>::is_always_lock_free);

extern "C" void on_stop_signal(int sig) {
  if (stop_signal.exchange(sig) == 0) return;
  ::signal(sig, SIG_DFL);  // a second signal: its default action, at once
  ::raise(sig);
}

}  // namespace

struct StopSignals::Previous {
  struct sigaction interrupt {
  }, terminate{};
};

StopSignals::StopSignals() : previous_(std::make_unique<Previous>()) {
  stop_signal = 0;
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;  // system calls (writes, fsyncs) continue
  ::sigaction(SIGINT, &action, &previous_->interrupt);
  ::sigaction(SIGTERM, &action, &previous_->terminate);
}

StopSignals::~StopSignals() {
  ::sigaction(SIGINT, &previous_->interrupt, nullptr);
  ::sigaction(SIGTERM, &previous_->terminate, nullptr);
}

int StopSignals::received() const { return stop_signal.load(); }

}  // namespace sprig
