// Eigen arrays for the CPU kernels' vectorised row math (exp, log, sums, maxima over contiguous
// runs), and the scratch buffers they may map.
//
// Eigen's vectorised loops process an unaligned head of a mapped run with scalar code, whose
// rounding (std::exp) differs from the vector path (its own exp): a result would then depend on
// where the run starts in memory. Storages are 64-byte aligned, so runs inside tensors start at
// offsets their shapes fix; scratch buffers come from ScratchBuffer, aligned the same way, never
// from a plain std::vector whose address the heap picks (two builds of one program would round
// differently).
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

// GCC 12 reports false -Wmaybe-uninitialized warnings inside its AVX-512 intrinsics headers; the
// pragma covers those headers, included first by Eigen here.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <Eigen/Core>
#pragma GCC diagnostic pop

namespace sprig::cpu {

template <class A> using ArrayMap = Eigen::Map<Eigen::Array<A, Eigen::Dynamic, 1>>;
template <class A> using ConstArrayMap = Eigen::Map<const Eigen::Array<A, Eigen::Dynamic, 1>>;
template <class A> using ScratchBuffer = std::vector<A, Eigen::aligned_allocator<A>>;

// Elements per vectorised block: a few L1-sized arrays, and a multiple of 16, so every block of a
// run starts as aligned as the run does and rounds the same whichever thread takes it.
constexpr int64_t kVectorBlock = 4096;

// Calls f(offset, length) for the consecutive kVectorBlock blocks of [0, n), split across threads
// when n exceeds `grain`.
template <class F> void for_each_block(int64_t n, int64_t grain, F&& f) {
  const int64_t blocks = (n + kVectorBlock - 1) / kVectorBlock;
#pragma omp parallel for if (n > grain)
  for (int64_t b = 0; b < blocks; ++b)
    f(b * kVectorBlock, std::min(kVectorBlock, n - b * kVectorBlock));
}

}  // namespace sprig::cpu
