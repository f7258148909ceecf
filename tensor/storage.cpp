#include "tensor/storage.h"

#include <atomic>
#include <cstdlib>
#include <new>

#include "tensor/cuda/kernels.h"

namespace sprig {

namespace {
std::atomic<size_t> cpu_current{0}, cpu_peak{0};
constexpr size_t kCpuAlignment = 64;
}  // namespace

Storage::Storage(size_t bytes, Device device) : bytes_(bytes), device_(device) {
  if (bytes == 0) return;
  if (device.is_cpu()) {
    const size_t rounded = (bytes + kCpuAlignment - 1) / kCpuAlignment * kCpuAlignment;
    data_ = std::aligned_alloc(kCpuAlignment, rounded);
    if (!data_) throw std::bad_alloc();
    const size_t now = cpu_current.fetch_add(bytes) + bytes;
    size_t peak = cpu_peak.load();
    while (now > peak && !cpu_peak.compare_exchange_weak(peak, now)) {
    }
  } else {
    data_ = cuda::device_malloc(bytes, device.index);
  }
}

Storage::~Storage() {
  if (!data_) return;
  if (device_.is_cpu()) {
    std::free(data_);
    cpu_current.fetch_sub(bytes_);
  } else {
    cuda::device_free(data_, device_.index);
  }
}

size_t cpu_memory_allocated() { return cpu_current.load(); }
size_t cpu_memory_peak() { return cpu_peak.load(); }

}  // namespace sprig
