// Host-side planning of cuBLASLt GEMMs, free of CUDA headers so that it is tested on the CPU: the
// alignment cuBLASLt may assume for an operand, and the cache of plans (descriptors, layouts and
// the heuristic's algorithm) keyed by everything that determines them.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "tensor/dtype.h"

namespace sprig::cuda {

// Every row of a row-major operand starts at base + i * pitch and every batch's matrix at
// base + b * stride, so the guarantee is the largest power of two dividing the base address, the
// row pitch and (with more than one matrix) the batch stride, all in bytes, capped at the 256
// bytes cuBLASLt assumes when told nothing.
inline uint32_t operand_alignment(uintptr_t address, uint64_t pitch_bytes,
                                  uint64_t batch_stride_bytes) {
  uint64_t bits = address | pitch_bytes | batch_stride_bytes | 256;
  return static_cast<uint32_t>(std::min<uint64_t>(256, bits & (~bits + 1)));
}

// What a GEMM's plan depends on: the device (its handle and workspace), the dtype, the sizes, the
// transposes, whether b is shared by the batch, and the three operands' alignments (the heuristic
// only returns algorithms that accept them).
struct GemmKey {
  int device = 0;
  DType dtype = DType::f32;
  int64_t batch = 0, m = 0, n = 0, k = 0;
  bool trans_a = false, trans_b = false, shared_b = false;
  uint32_t align_a = 0, align_b = 0, align_out = 0;

  bool operator==(const GemmKey&) const = default;
};

struct GemmKeyHash {
  size_t operator()(const GemmKey& key) const {
    size_t h = std::hash<int>{}(key.device);
    const auto mix = [&h](uint64_t v) {
      h ^= std::hash<uint64_t>{}(v) + 0x9e3779b97f4a7c15 + (h << 6) + (h >> 2);
    };
    mix(static_cast<uint64_t>(key.dtype));
    for (int64_t v : {key.batch, key.m, key.n, key.k}) mix(static_cast<uint64_t>(v));
    mix(uint64_t(key.trans_a) | uint64_t(key.trans_b) << 1 | uint64_t(key.shared_b) << 2);
    mix(uint64_t(key.align_a) | uint64_t(key.align_b) << 16 | uint64_t(key.align_out) << 32);
    return h;
  }
};

// A thread-safe map from GemmKey to a shared, immutable plan, created once per key. A training run
// sees a few dozen shapes; should a workload keep producing new ones (e.g. ever-changing sequence
// lengths), the cache empties itself at `capacity` plans rather than grow without bound. Plans in
// use stay alive through their shared_ptr.
template <class Plan> class GemmPlanCache {
 public:
  explicit GemmPlanCache(size_t capacity) : capacity_(capacity) {}

  // The plan of `key`, made by make() (returning a Plan) on the first request. make() runs under
  // the cache's lock: it may throw, which leaves the cache unchanged.
  template <class Make> std::shared_ptr<const Plan> get(const GemmKey& key, Make&& make) {
    const std::lock_guard<std::mutex> lock(mutex_);
    if (const auto it = plans_.find(key); it != plans_.end()) return it->second;
    auto plan = std::make_shared<const Plan>(make());
    if (plans_.size() >= capacity_) plans_.clear();
    plans_.emplace(key, plan);
    return plan;
  }

  size_t size() const {
    const std::lock_guard<std::mutex> lock(mutex_);
    return plans_.size();
  }

 private:
  const size_t capacity_;
  mutable std::mutex mutex_;
  std::unordered_map<GemmKey, std::shared_ptr<const Plan>, GemmKeyHash> plans_;
};

}  // namespace sprig::cuda
