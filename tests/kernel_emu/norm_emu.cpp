// tensor/cuda/norm.cu run on the emulated device against the CPU twin, under the GPU tests' parity
// rule, on the shapes of tests/tensor/norm_gpu.cpp (scalar and 16-byte vector paths).
#include <gtest/gtest.h>

#include "tensor/cuda/norm.cu"  // compiled against tests/kernel_emu/device_emu.h
#include "tensor/ops.h"
#include "tests/kernel_emu/emu_test_util.h"
#include "tests/test_util.h"

namespace sprig {
namespace {

using testing::rand_normal;

TEST(RmsNormEmu, ForwardAndBackwardMatchTheCpuTwin) {
  uint64_t seed = 0;
  for (DType dt : {DType::f32, DType::bf16})
    for (int64_t R : {1, 17, 33})
      for (int64_t H : {31, 33, 1024}) {
        SCOPED_TRACE(std::string(dtype_name(dt)) + " R=" + std::to_string(R) +
                     " H=" + std::to_string(H));
        const Tensor x = rand_normal({R, H}, ++seed, dt), w = rand_normal({H}, ++seed, dt);
        const Tensor dy = rand_normal({R, H}, ++seed, dt);
        const auto [y, rstd] = rms_norm(x, w, 1e-6);
        const Tensor ey = emu::nan_like(y), erstd = emu::nan_like(rstd);
        cuda::rms_norm(x, w, ey, erstd, 1e-6, nullptr);
        EXPECT_EMU_PARITY(ey, y);
        EXPECT_EMU_PARITY(erstd, rstd, H, 1.0 / static_cast<double>(H));
        for (DType dw_dt : {DType::f32, dt}) {  // dw accumulates (from 1)
          const Tensor dw = Tensor::ones({H}, dw_dt), edw = Tensor::ones({H}, dw_dt);
          const Tensor dx = rms_norm_backward(dy, x, w, rstd, dw), edx = emu::nan_like(dx);
          cuda::rms_norm_backward(dy, x, w, rstd, edx, edw, nullptr);
          EXPECT_EMU_PARITY(edx, dx, H);
          EXPECT_EMU_PARITY(edw, dw, R);
        }
      }
}

}  // namespace
}  // namespace sprig
