#include "tensor/storage.h"

#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <new>
#include <string>

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

size_t cpu_memory_available() {
  std::ifstream meminfo("/proc/meminfo");
  for (std::string key; meminfo >> key;) {
    size_t kib = 0;
    meminfo >> kib;
    if (key == "MemAvailable:") return kib * 1024;
    meminfo.ignore(256, '\n');
  }
  return static_cast<size_t>(::sysconf(_SC_AVPHYS_PAGES)) * static_cast<size_t>(::getpagesize());
}

}  // namespace sprig
