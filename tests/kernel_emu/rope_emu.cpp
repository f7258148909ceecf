// tensor/cuda/rope.cu run on the emulated device against the CPU twin: the table of
// tests/parity/rope_cases.h, and position 0 as the exact identity.
#include <gtest/gtest.h>

#include "tensor/cuda/rope.cu"  // compiled against tests/kernel_emu/device_emu.h
#include "tensor/ops.h"
#include "tests/parity/rope_cases.h"
#include "tests/test_util.h"

namespace sprig {
namespace {

using testing::all_close;
using testing::rand_normal;

SPRIG_EMU_PARITY_TEST(RopeEmu, ForwardAndInverseMatchTheCpuTwin, parity::rope_cases())

TEST(RopeEmu, PositionZeroIsIdentity) {
  const Tensor x = rand_normal({1, 5, 2, 128}, 250, DType::bf16), y = parity::nan_like(x);
  cuda::rope(x, Tensor::zeros({1, 5}, DType::i32), y, rope_frequencies(128, 1e4), false, nullptr);
  EXPECT_TRUE(all_close(y, x, 0.0));
}

}  // namespace
}  // namespace sprig
