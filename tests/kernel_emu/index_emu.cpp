// tensor/cuda/index.cu's range check of loss targets and teacher rows run on the emulated device
// against the CPU twin: the first bad position wins whatever order the threads find bad values in
// (bad values in several blocks of a grid-stride pass), skipped values are never bad, and a clean
// index leaves `first` as it was.
#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <vector>

#include "tensor/cuda/index.cu"  // compiled against tests/kernel_emu/device_emu.h
#include "tensor/ops.h"

namespace sprig {
namespace {

// The first bad position of idx (or n) by the CPU twin and by the emulated kernel.
std::pair<int64_t, int64_t> both(const Tensor& idx, int64_t limit, std::optional<int64_t> skip) {
  const auto n = static_cast<double>(idx.numel());
  const Tensor cpu = Tensor::full({1}, n, DType::i64), emulated = Tensor::full({1}, n, DType::i64);
  cpu::first_out_of_range(idx, limit, skip.has_value(), skip.value_or(0), cpu);
  cuda::first_out_of_range(idx, limit, skip.has_value(), skip.value_or(0), emulated, nullptr);
  return {cpu.to_vector<int64_t>()[0], emulated.to_vector<int64_t>()[0]};
}

TEST(FirstOutOfRangeEmu, TheFirstBadPositionWinsAndSkippedValuesPass) {
  const int64_t n = 3000, V = 50;  // 12 blocks of 256 threads
  for (DType dtype : {DType::i64, DType::i32}) {
    SCOPED_TRACE(dtype_name(dtype));
    std::vector<int64_t> ids(n);
    for (int64_t i = 0; i < n; ++i) ids[i] = i % V;
    for (int64_t i : {100, 2000}) ids[i] = -100;  // ignore_index rows
    const auto make = [&] { return Tensor::from_vector(ids, {n}).to(dtype); };
    EXPECT_EQ(both(make(), V, -100), std::make_pair(n, n));

    ids[2999] = V;     // in the last block
    ids[1500] = -1;    // in a middle block
    ids[777] = V + 7;  // the first bad row
    EXPECT_EQ(both(make(), V, -100), std::make_pair(int64_t{777}, int64_t{777}));
    // Without a skipped value (teacher rows), row 100's -100 is the first bad one.
    EXPECT_EQ(both(make(), V, std::nullopt), std::make_pair(int64_t{100}, int64_t{100}));
    ids[0] = V;  // the target equal to V at row 0
    EXPECT_EQ(both(make(), V, -100), std::make_pair(int64_t{0}, int64_t{0}));
  }
  EXPECT_EQ(both(Tensor::zeros({0}, DType::i64), V, -100), std::make_pair(int64_t{0}, int64_t{0}));
}

}  // namespace
}  // namespace sprig
