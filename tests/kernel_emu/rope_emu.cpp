// tensor/cuda/rope.cu run on the emulated device against the CPU twin, under the GPU tests' parity
// rule, on the shapes of tests/tensor/rope_gpu.cpp: the rotation and its inverse (the backward) in
// f32 and bf16 with i32 and i64 positions (the latter with an attention scaling), and position 0 as
// the exact identity.
#include <gtest/gtest.h>

#include "tensor/cuda/rope.cu"  // compiled against tests/kernel_emu/device_emu.h
#include "tensor/ops.h"
#include "tests/kernel_emu/emu_test_util.h"
#include "tests/test_util.h"

namespace sprig {
namespace {

using testing::all_close;
using testing::rand_normal;
using testing::rand_uniform;

TEST(RopeEmu, ForwardAndInverseMatchTheCpuTwin) {
  uint64_t seed = 200;
  for (DType dt : {DType::f32, DType::bf16})
    for (int64_t D : {64, 128})
      for (DType pos_dt : {DType::i64, DType::i32}) {
        // i64 positions with YaRN's attention scaling on cos and sin, i32 without.
        RopeFrequencies f = rope_frequencies(D, 1e6);
        if (pos_dt == DType::i64) f.attention_scaling = 1.2079441f;
        SCOPED_TRACE(std::string(dtype_name(dt)) + " D=" + std::to_string(D) + " pos " +
                     dtype_name(pos_dt));
        const Tensor x = rand_normal({2, 17, 3, D}, ++seed, dt);
        const Tensor pos = rand_uniform({2, 17}, 0, 32768, ++seed).to(pos_dt);
        const Tensor y = rope(x, pos, f), dx = rope_backward(x, pos, f);
        const Tensor ey = emu::nan_like(y), edx = emu::nan_like(dx);
        cuda::rope(x, pos, ey, f, false, nullptr);
        cuda::rope(x, pos, edx, f, true, nullptr);
        // x1 cos - x2 sin: two terms of size up to |x| ~ 2 that can cancel.
        EXPECT_EMU_PARITY(ey, y, 2, 2.0);
        EXPECT_EMU_PARITY(edx, dx, 2, 2.0);
      }
}

TEST(RopeEmu, PositionZeroIsIdentity) {
  const Tensor x = rand_normal({1, 5, 2, 128}, 250, DType::bf16), y = emu::nan_like(x);
  cuda::rope(x, Tensor::zeros({1, 5}, DType::i32), y, rope_frequencies(128, 1e4), false, nullptr);
  EXPECT_TRUE(all_close(y, x, 0.0));
}

}  // namespace
}  // namespace sprig
