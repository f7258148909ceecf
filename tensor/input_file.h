// Input files, checked in one place before they are opened (docs/architecture.md §7): a directory
// given where a file is read fails obscurely, and a FIFO, device or socket can block forever.
#pragma once

#include <string>

namespace sprig {

// Refuses an existing `path` (symbolic links followed) that is not a regular file:
// "<where><path> is a directory: give <what>" or "<where><path> is not a regular file (a FIFO):
// give <what>". A missing path passes: its reader says it cannot open it.
void check_input_file(const std::string& path, const std::string& what,
                      const std::string& where = "");

}  // namespace sprig
