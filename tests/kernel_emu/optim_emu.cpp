// tensor/cuda/optim.cu run on the emulated device against the CPU twins: the two-stage sum of
// squares behind global_norm (one element, ragged blocks, bf16, a grid-stride pass over 2^20
// elements, an empty tensor) and AdamW (the table of tests/parity/optim_cases.h).
#include <gtest/gtest.h>

#include <cmath>

#include "tensor/cuda/optim.cu"  // compiled against tests/kernel_emu/device_emu.h
#include "tensor/ops.h"
#include "tests/kernel_emu/emu_test_util.h"
#include "tests/parity/optim_cases.h"
#include "tests/test_util.h"

namespace sprig {
namespace {

using testing::rand_normal;

TEST(SumSquaresEmu, MatchesTheCpuKernelAndGivesTheGlobalNorm) {
  const std::vector<Tensor> ts = {rand_normal({1}, 1), rand_normal({1025}, 2),
                                  rand_normal({97, 33}, 3, DType::bf16), rand_normal({1 << 20}, 4),
                                  Tensor::zeros({0})};
  double total = 0;
  for (const Tensor& x : ts) {
    SCOPED_TRACE(std::string(dtype_name(x.dtype())) + " " + shape_str(x.shape()));
    const Tensor cpu = Tensor::empty({1}, DType::f64), emulated = Tensor::full({1}, NAN);
    cpu::sum_squares(x, cpu);
    cuda::sum_squares(x, emulated, nullptr);
    // fp32 partial sums (f64 on the CPU): x.numel() terms of size about 1.
    EXPECT_EMU_PARITY(emulated, cpu.to(DType::f32), x.numel());
    total += emulated.to_vector<double>()[0];
  }
  const double norm = global_norm(ts);
  EXPECT_NEAR(std::sqrt(total), norm, testing::parity_tolerance(DType::f32).rtol * norm);
}

SPRIG_EMU_PARITY_TEST(AdamWEmu, MatchesTheCpuTwinOverThreeStepsOneScaled, parity::adamw_cases())

}  // namespace
}  // namespace sprig
