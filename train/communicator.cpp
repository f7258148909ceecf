#include "train/communicator.h"

#include <dlfcn.h>

#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <string>

// The plugins' entry points (train/mpi_communicator.cpp, train/nccl_communicator.cpp).
using MakeMpi = sprig::Communicator* (*)();
using MakeNccl = sprig::Communicator* (*)(sprig::Communicator* mpi);
using ReferenceAllReduce = void (*)(float* data, int64_t count);

namespace sprig {

namespace {

// The plugins' folder: plugins/ beside the running executable's folder (build/plugins for
// build/tools/sprig and build/tests/*, a bundle's plugins/ for its bin/sprig).
std::filesystem::path plugin_dir() {
  std::error_code error;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", error);
  if (error)
    throw std::runtime_error("[launch] cannot find the running executable to locate its plugins: " +
                             error.message());
  return exe.parent_path().parent_path() / "plugins";
}

// A symbol of plugin `name` (lib<name>.so in plugin_dir()), loaded once and kept. Global scope:
// Open MPI's own components look up libmpi's symbols there.
void* plugin_symbol(const std::string& name, const char* symbol, const std::string& needs) {
  const std::string path = (plugin_dir() / ("lib" + name + ".so")).string();
  void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);  // the loaded one when it is
  if (!handle) {
    const char* why = ::dlerror();
    throw std::runtime_error("[launch] started as one of " + std::to_string(launcher_world_size()) +
                             " ranks, but " + path + " cannot be loaded (" +
                             (why ? why : "unknown reason") + "): " + needs);
  }
  void* address = ::dlsym(handle, symbol);
  if (!address)
    throw std::runtime_error("[launch] " + path + " has no " + symbol +
                             ": rebuild sprig so that the plugin matches it");
  return address;
}

const char* const kNeedsMpi =
    "several ranks need sprig built with Open MPI (install libopenmpi-dev and rebuild)";

std::unique_ptr<Communicator> make_mpi_communicator() {
  auto make = reinterpret_cast<MakeMpi>(plugin_symbol("sprig_mpi", "sprig_make_mpi", kNeedsMpi));
  return std::unique_ptr<Communicator>(make());
}

std::unique_ptr<Communicator> make_nccl_communicator(std::unique_ptr<Communicator> mpi) {
  auto make = reinterpret_cast<MakeNccl>(
      plugin_symbol("sprig_nccl", "sprig_make_nccl",
                    "a CUDA run of several ranks needs sprig built with CUDA, NCCL and Open MPI"));
  return std::unique_ptr<Communicator>(make(mpi.release()));  // it owns the MPI communicator
}

}  // namespace

void Communicator::abort(int code) { std::exit(code); }

int64_t Communicator::check_shards(const Tensor& full, const std::string& what) const {
  const int64_t world = world_size();
  if (!full.is_contiguous() || full.numel() % world != 0)
    throw std::invalid_argument("[" + what + "] needs a contiguous tensor of " +
                                std::to_string(world) + " equal shards, got " +
                                shape_str(full.shape()) +
                                (full.is_contiguous() ? "" : " (not contiguous)"));
  return full.numel() / world;
}

Tensor Communicator::shard(const Tensor& full) const {
  const int64_t n = check_shards(full, "shard");
  return full.view({full.numel()}).narrow(0, rank() * n, n);
}

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

int device_for_local_rank(int64_t local_rank, int device_count) {
  if (device_count < 1)
    throw std::runtime_error("[launch] local rank " + std::to_string(local_rank) +
                             " of a CUDA run sees no CUDA device (check CUDA_VISIBLE_DEVICES)");
  return static_cast<int>(local_rank % device_count);
}

void mpi_reference_all_reduce(float* data, int64_t count) {
  static const auto reduce = reinterpret_cast<ReferenceAllReduce>(
      plugin_symbol("sprig_mpi", "sprig_mpi_reference_all_reduce", kNeedsMpi));
  reduce(data, count);
}

}  // namespace sprig
