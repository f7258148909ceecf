// A progress line on stderr for long commands (eval, score, data tokenize). On a terminal it is
// one line rewritten in place (the rest of the old text cleared); in a log file (stderr not a
// terminal) each update is a line of its own, at most one every kLogInterval (and the last one), so
// the log stays readable. It is ended by finish() or when its scope exits, so that an error message
// starts on a line of its own.
#pragma once

#include <unistd.h>

#include <chrono>
#include <iostream>
#include <string>

#include "nn/positions.h"

namespace sprig::tools {

class ProgressLine {
 public:
  static constexpr std::chrono::seconds kLogInterval{10};

  ProgressLine() : terminal_(::isatty(STDERR_FILENO) == 1) {}
  ~ProgressLine() { finish(); }
  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;

  void show(const std::string& text) {
    if (terminal_) {
      std::cerr << "\r" << text << "\x1b[K" << std::flush;  // ESC [K: clear to the line's end
      shown_ = true;
      return;
    }
    const auto now = std::chrono::steady_clock::now();
    pending_ = text;
    if (logged_ && now - last_ < kLogInterval) return;
    std::cerr << text << "\n" << std::flush;
    pending_.clear();
    logged_ = true;
    last_ = now;
  }
  // Ends the line; in a log, writes the last update if it was held back.
  void finish() {
    if (shown_) std::cerr << "\n";
    if (!pending_.empty()) std::cerr << pending_ << "\n" << std::flush;
    shown_ = false;
    pending_.clear();
  }

 private:
  bool terminal_, shown_ = false, logged_ = false;
  std::string pending_;  // a log's update not yet written
  std::chrono::steady_clock::time_point last_;
};

// positions.check(end, what), its one warning on a line of its own (the progress line ended
// first).
inline void check_positions(PositionLimit& positions, ProgressLine& progress, int64_t end,
                            const std::string& what) {
  if (positions.first_past(end)) progress.finish();
  positions.check(end, what);
}

}  // namespace sprig::tools
