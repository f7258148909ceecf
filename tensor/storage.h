// Storage: one allocation of bytes on one device. CPU memory is 64-byte aligned; CUDA memory comes
// from the stream-ordered caching allocator (tensor/cuda/kernels.h), which tracks current and peak
// bytes.
#pragma once

#include <cstddef>
#include <memory>

#include "tensor/dtype.h"

namespace sprig {

class Storage {
 public:
  Storage(size_t bytes, Device device);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  Device device() const { return device_; }

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
  Device device_;
};

// Bytes currently held by / at most held by live CPU storages since the start or the last reset,
// which sets the peak to what is held now.
size_t cpu_memory_allocated();
size_t cpu_memory_peak();
void reset_cpu_memory_peak();
// Memory the system could still give this process (Linux MemAvailable, plus the freed blocks the
// allocator keeps for reuse), for refusing outputs and allocations that cannot fit before starting
// them.
size_t cpu_memory_available();
// Freed large CPU blocks kept for reuse (up to a quarter of the physical or cgroup memory, at least
// 1 GiB; none under AddressSanitizer), and handing them back to the system. An allocation the
// system cannot satisfy releases them first (checked for every block of 1 MiB and more while the
// cache holds more than 1 GiB).
size_t cpu_memory_cached();
void release_cpu_memory_cache();

}  // namespace sprig
