// SIGINT and SIGTERM while a loop runs (docs/semantics.md §10.13): the first one is recorded for
// the loop to read at its next boundary, a second one ends the process at once by its default
// action. The previous handlers come back when the StopSignals object goes.
#pragma once

#include <memory>

namespace sprig {

class StopSignals {
 public:
  StopSignals();  // installs the handlers and clears any earlier signal
  ~StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;
  int received() const;  // the first signal received (SIGINT, SIGTERM), or 0

 private:
  struct Previous;  // the handlers to restore
  std::unique_ptr<Previous> previous_;
};

}  // namespace sprig
