#include "tensor/storage.h"

#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <stdexcept>
#include <string>

#include "tensor/cuda/kernels.h"

namespace sprig {

namespace {
std::atomic<size_t> cpu_current{0}, cpu_peak{0};
constexpr size_t kCpuAlignment = 64;
// Allocations from this size on are checked against the memory available before they are made:
// with overcommit a huge one succeeds and the process is killed later, without a message.
constexpr size_t kCheckedAllocation = size_t{1} << 30;

[[noreturn]] void refuse_cpu_allocation(size_t bytes) {
  throw std::runtime_error(
      "[memory] a " + std::to_string(bytes >> 20) + " MiB CPU allocation does not fit the " +
      std::to_string(cpu_memory_available() >> 20) + " MiB of memory available");
}
}  // namespace

Storage::Storage(size_t bytes, Device device) : bytes_(bytes), device_(device) {
  if (bytes == 0) return;
  if (device.is_cpu()) {
    if (bytes >= kCheckedAllocation && bytes > cpu_memory_available()) refuse_cpu_allocation(bytes);
    const size_t rounded = (bytes + kCpuAlignment - 1) / kCpuAlignment * kCpuAlignment;
    data_ = rounded >= bytes ? std::aligned_alloc(kCpuAlignment, rounded) : nullptr;
    if (!data_) refuse_cpu_allocation(bytes);
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
