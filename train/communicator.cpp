#include "train/communicator.h"

#include <cstdlib>
#include <stdexcept>
#include <string>

namespace sprig {

void Communicator::abort(int code) { std::exit(code); }

Communicator& single_process() {
  static Communicator single;
  return single;
}

int64_t launcher_world_size() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMIX_SIZE", "PMI_SIZE"})
    if (const char* value = std::getenv(name)) {
      char* end = nullptr;
      const long long n = std::strtoll(value, &end, 10);
      if (end == value || *end != '\0' || n < 1)
        throw std::runtime_error(std::string("[launch] ") + name + "=" + value +
                                 " is not a number of ranks");
      return n;
    }
  return 1;
}

std::unique_ptr<Communicator> launch_communicator(bool cuda) {
  if (launcher_world_size() == 1) return std::make_unique<Communicator>();
  std::unique_ptr<Communicator> mpi = make_mpi_communicator();
  return cuda ? make_nccl_communicator(std::move(mpi)) : std::move(mpi);
}

#ifndef SPRIG_HAVE_MPI
std::unique_ptr<Communicator> make_mpi_communicator() {
  throw std::runtime_error(
      "[launch] started as one of " + std::to_string(launcher_world_size()) +
      " ranks, but this sprig was built without MPI: install libopenmpi-dev and rebuild");
}
#endif

#ifndef SPRIG_HAVE_NCCL
std::unique_ptr<Communicator> make_nccl_communicator(std::unique_ptr<Communicator> mpi) {
  (void)mpi;
  throw std::runtime_error(
      "[launch] a CUDA run with several ranks needs NCCL, and this sprig was built without it");
}
#endif

}  // namespace sprig
