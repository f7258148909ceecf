// tensor/cuda/swiglu.cu run on the emulated device against the CPU twin, under the GPU tests'
// parity rule, on the shapes of tests/tensor/swiglu_gpu.cpp: forward and backward in f32 and bf16,
// on the 16-byte vector path (97 x 1024: a multiple of 8 elements) and the scalar one (the others).
#include <gtest/gtest.h>

#include "tensor/cuda/swiglu.cu"  // compiled against tests/kernel_emu/device_emu.h
#include "tensor/ops.h"
#include "tests/kernel_emu/emu_test_util.h"
#include "tests/test_util.h"

namespace sprig {
namespace {

using testing::rand_normal;

TEST(SwigluEmu, ForwardAndBackwardMatchTheCpuTwin) {
  uint64_t seed = 300;
  for (DType dt : {DType::f32, DType::bf16})
    for (const Shape& shape : {Shape{1}, Shape{17, 33}, Shape{97, 1024}, Shape{1025, 31}}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " " + shape_str(shape));
      const Tensor gate = rand_normal(shape, ++seed, dt), up = rand_normal(shape, ++seed, dt);
      const Tensor dout = rand_normal(shape, ++seed, dt);
      const Tensor out = swiglu(gate, up), eout = emu::nan_like(out);
      cuda::swiglu(gate, up, eout, nullptr);
      EXPECT_EMU_PARITY(eout, out);
      const auto [dgate, dup] = swiglu_backward(gate, up, dout);
      const Tensor edgate = emu::nan_like(dgate), edup = emu::nan_like(dup);
      cuda::swiglu_backward(gate, up, dout, edgate, edup, nullptr);
      EXPECT_EMU_PARITY(edgate, dgate);
      EXPECT_EMU_PARITY(edup, dup);
    }
}

}  // namespace
}  // namespace sprig
