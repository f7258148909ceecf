#include "tensor/storage.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>

#include "tensor/cuda/kernels.h"

namespace sprig {

namespace {
std::atomic<size_t> cpu_current{0}, cpu_peak{0};
size_t system_memory_available();  // Linux MemAvailable
constexpr size_t kCpuAlignment = 64;
// Allocations from this size on are checked against the memory available before they are made:
// with overcommit a huge one succeeds and the process is killed later, without a message.
constexpr size_t kCheckedAllocation = size_t{1} << 30;

[[noreturn]] void refuse_cpu_allocation(size_t bytes) {
  throw std::runtime_error(
      "[memory] a " + std::to_string(bytes >> 20) + " MiB CPU allocation does not fit the " +
      std::to_string(cpu_memory_available() >> 20) + " MiB of memory available");
}

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SPRIG_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(SPRIG_ASAN)
constexpr bool kCacheBlocks = false;  // AddressSanitizer must see every block freed
#else
constexpr bool kCacheBlocks = true;
#endif
constexpr size_t kCachedFrom = size_t{1} << 20;  // smaller blocks stay in malloc's own bins
// The memory this process may use: the physical memory, or less where a cgroup (v2 memory.max,
// v1 memory.limit_in_bytes) limits it, as in a container.
size_t memory_limit() {
  size_t limit =
      static_cast<size_t>(::sysconf(_SC_PHYS_PAGES)) * static_cast<size_t>(::getpagesize());
  for (const char* path :
       {"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}) {
    std::ifstream file(path);
    size_t bytes = 0;
    if (file >> bytes && bytes > 0) limit = std::min(limit, bytes);  // "max" reads as no number
  }
  return limit;
}

// The most the cache keeps: a quarter of memory_limit(), at least 1 GiB. A step's working set (a
// long GRU's gates alone can be a GiB) is reused whole only when it fits.
size_t cache_budget() {
  static const size_t budget = std::max(size_t{1} << 30, memory_limit() / 4);
  return budget;
}

// Large CPU blocks a step frees are what the next step asks for again. Handed back to the system
// (malloc maps blocks this large on their own), each would be faulted in and zero-filled page by
// page on its next use; the cache keeps up to cache_budget() bytes of them for reuse instead. Sizes
// are rounded up to 1/16 of their power of two, so one block serves requests a little smaller.
class CpuBlockCache {
 public:
  static CpuBlockCache& instance() {
    static CpuBlockCache* cache = new CpuBlockCache;  // never destroyed: blocks outlive statics
    return *cache;
  }
  // The size a request of `bytes` (>= kCachedFrom) occupies.
  static size_t block_size(size_t bytes) {
    const size_t step = std::bit_ceil(bytes) / 16;
    return (bytes + step - 1) / step * step;
  }
  void* take(size_t size) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = free_.find(size);
    if (it == free_.end()) return nullptr;
    void* p = it->second;
    free_.erase(it);
    cached_ -= size;
    return p;
  }
  // Keeps the block when the budget allows; false hands it back to the caller to free.
  bool keep(void* p, size_t size) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (cached_ + size > cache_budget()) return false;
    free_.emplace(size, p);
    cached_ += size;
    return true;
  }
  void release() {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& [size, p] : free_) std::free(p);
    free_.clear();
    cached_ = 0;
  }
  size_t cached() {
    std::lock_guard<std::mutex> lock(mutex_);
    return cached_;
  }

 private:
  std::mutex mutex_;
  std::multimap<size_t, void*> free_;
  size_t cached_ = 0;
};

// The capacity a CPU block of `bytes` is allocated with.
size_t cpu_block_size(size_t bytes) {
  if (kCacheBlocks && bytes >= kCachedFrom) return CpuBlockCache::block_size(bytes);
  return (bytes + kCpuAlignment - 1) / kCpuAlignment * kCpuAlignment;
}

void* allocate_cpu(size_t bytes) {
  if (bytes > size_t{1} << 62) refuse_cpu_allocation(bytes);  // before any rounding can overflow
  const size_t size = cpu_block_size(bytes);
  if (kCacheBlocks && bytes >= kCachedFrom)
    if (void* p = CpuBlockCache::instance().take(size)) return p;
  // A huge request, or a cached-size one while the cache holds more than 1 GiB, is checked against
  // what the system has left: with overcommit it would succeed now and be killed when its pages
  // are touched.
  const bool check =
      bytes >= kCheckedAllocation || (kCacheBlocks && bytes >= kCachedFrom &&
                                      CpuBlockCache::instance().cached() > kCheckedAllocation);
  if (check && bytes > system_memory_available()) {
    CpuBlockCache::instance().release();
    if (bytes > system_memory_available()) refuse_cpu_allocation(bytes);
  }
  void* p = std::aligned_alloc(kCpuAlignment, size);
  if (!p) {  // what the cache holds may be what is missing
    CpuBlockCache::instance().release();
    p = std::aligned_alloc(kCpuAlignment, size);
  }
  if (!p) refuse_cpu_allocation(bytes);
  return p;
}

void free_cpu(void* p, size_t bytes) {
  if (kCacheBlocks && bytes >= kCachedFrom &&
      CpuBlockCache::instance().keep(p, cpu_block_size(bytes)))
    return;
  std::free(p);
}
}  // namespace

size_t cpu_memory_cached() { return CpuBlockCache::instance().cached(); }
void release_cpu_memory_cache() { CpuBlockCache::instance().release(); }

Storage::Storage(size_t bytes, Device device) : bytes_(bytes), device_(device) {
  if (bytes == 0) return;
  if (device.is_cpu()) {
    data_ = allocate_cpu(bytes);
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
    free_cpu(data_, bytes_);
    cpu_current.fetch_sub(bytes_);
  } else {
    cuda::device_free(data_, device_.index);
  }
}

size_t cpu_memory_allocated() { return cpu_current.load(); }
size_t cpu_memory_peak() { return cpu_peak.load(); }
void reset_cpu_memory_peak() { cpu_peak.store(cpu_current.load()); }

size_t cpu_memory_available() { return system_memory_available() + cpu_memory_cached(); }

namespace {
size_t system_memory_available() {
  std::ifstream meminfo("/proc/meminfo");
  for (std::string key; meminfo >> key;) {
    size_t kib = 0;
    meminfo >> kib;
    if (key == "MemAvailable:") return kib * 1024;
    meminfo.ignore(256, '\n');
  }
  return static_cast<size_t>(::sysconf(_SC_AVPHYS_PAGES)) * static_cast<size_t>(::getpagesize());
}
}  // namespace

}  // namespace sprig
