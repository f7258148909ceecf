// CPU-only build (-DSPRIG_CUDA=OFF): the CUDA runtime functions. device_count() reports that no
// device is present; the others throw "[name] built without CUDA". (The kernels need no stand-ins:
// SPRIG_DISPATCH discards their calls at compile time.)
#include <stdexcept>

#include "tensor/cuda/kernels.h"

namespace sprig::cuda {

namespace {
[[noreturn]] void no_cuda(const char* name) {
  throw std::runtime_error(std::string("[") + name + "] built without CUDA");
}
}  // namespace

int device_count() { return 0; }
int runtime_version() { return 0; }
int driver_version() { return 0; }
std::string device_name(int) { no_cuda("device_name"); }
cudaStream_t current_stream(int) { no_cuda("current_stream"); }
void synchronize(int) { no_cuda("synchronize"); }
void* device_malloc(size_t, int) { no_cuda("device_malloc"); }
void device_free(void*, int) { no_cuda("device_free"); }
size_t memory_allocated(int) { no_cuda("memory_allocated"); }
size_t memory_peak(int) { no_cuda("memory_peak"); }
void reset_memory_peak(int) { no_cuda("reset_memory_peak"); }
void copy_host_to_device(void*, const void*, size_t, int) { no_cuda("copy_host_to_device"); }
void copy_device_to_host(void*, const void*, size_t, int) { no_cuda("copy_device_to_host"); }

}  // namespace sprig::cuda
