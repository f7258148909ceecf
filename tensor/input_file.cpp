#include "tensor/input_file.h"

#include <sys/stat.h>

#include <stdexcept>

namespace sprig {

void check_input_file(const std::string& path, const std::string& what, const std::string& where) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || S_ISREG(st.st_mode)) return;
  const char* type = S_ISDIR(st.st_mode)    ? nullptr
                     : S_ISFIFO(st.st_mode) ? "a FIFO"
                     : S_ISCHR(st.st_mode)  ? "a character device"
                     : S_ISBLK(st.st_mode)  ? "a block device"
                     : S_ISSOCK(st.st_mode) ? "a socket"
                                            : "a special file";
  throw std::runtime_error(where + path +
                           (type ? " is not a regular file (" + std::string(type) + ")"
                                 : std::string(" is a directory")) +
                           ": give " + what);
}

}  // namespace sprig
