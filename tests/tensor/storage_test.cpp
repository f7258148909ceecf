// The CPU allocator's cache of large freed blocks: a block a tensor frees is what the next tensor
// of about its size gets back (no page faults, no zero-fill), the live-bytes counters ignore what
// is cached, what is cached counts as available, and releasing hands it back; the peak counter and
// its reset.
#include "tensor/storage.h"

#include <gtest/gtest.h>

#include "tensor/tensor.h"

namespace sprig {
namespace {

TEST(CpuMemory, ThePeakIsTheMostHeldSinceTheLastReset) {
  const size_t live = cpu_memory_allocated();
  { const Tensor big = Tensor::empty({int64_t{1} << 20}); }
  EXPECT_GE(cpu_memory_peak(), live + (size_t{4} << 20));
  reset_cpu_memory_peak();
  EXPECT_EQ(cpu_memory_peak(), live);
  { const Tensor small = Tensor::empty({1024}); }
  EXPECT_EQ(cpu_memory_peak(), live + 4096);
}

TEST(CpuBlockCache, AFreedLargeBlockServesTheNextRequestOfItsSizeClass) {
  release_cpu_memory_cache();
  const size_t live = cpu_memory_allocated();
  const int64_t floats = int64_t{1} << 20;  // 4 MiB
  const void* first = nullptr;
  {
    const Tensor t = Tensor::empty({floats});
    first = t.data<float>();
    EXPECT_EQ(cpu_memory_allocated(), live + 4 * static_cast<size_t>(floats));
  }
  if (cpu_memory_cached() == 0) GTEST_SKIP() << "blocks are not cached (AddressSanitizer build)";
  EXPECT_EQ(cpu_memory_allocated(), live);
  EXPECT_EQ(cpu_memory_cached(), 4 * static_cast<size_t>(floats));
  EXPECT_GE(cpu_memory_available(), cpu_memory_cached());
  {
    // 1/16 of the power of two below it: the same 4 MiB class.
    const Tensor smaller = Tensor::empty({floats - floats / 32});
    EXPECT_EQ(smaller.data<float>(), first);
    EXPECT_EQ(cpu_memory_cached(), 0u);
    const Tensor other = Tensor::empty({floats});  // the class is empty: a new block
    EXPECT_NE(other.data<float>(), first);
  }
  EXPECT_EQ(cpu_memory_cached(), 8 * static_cast<size_t>(floats));  // both kept
  release_cpu_memory_cache();
  EXPECT_EQ(cpu_memory_cached(), 0u);
  // Small blocks are left to malloc.
  { const Tensor small = Tensor::empty({1024}); }
  EXPECT_EQ(cpu_memory_cached(), 0u);
}

}  // namespace
}  // namespace sprig
