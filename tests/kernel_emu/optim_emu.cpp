// tensor/cuda/optim.cu run on the emulated device against the CPU twins, on the shapes of
// tests/tensor/optim_gpu.cpp: the two-stage sum of squares behind global_norm (one element, ragged
// blocks, bf16, a grid-stride pass over 2^20 elements, an empty tensor) and three AdamW steps with
// f32 and bf16 gradients, with no compute copy and with bf16 and f16 ones.
#include <gtest/gtest.h>

#include <cmath>
#include <optional>

#include "tensor/cuda/optim.cu"  // compiled against tests/kernel_emu/device_emu.h
#include "tensor/ops.h"
#include "tests/kernel_emu/emu_test_util.h"
#include "tests/test_util.h"

namespace sprig {
namespace {

using testing::all_close;
using testing::rand_normal;
using testing::rand_uniform;

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

TEST(AdamWEmu, MatchesTheCpuTwinOverThreeStepsOneScaled) {
  for (DType grad_dt : {DType::f32, DType::bf16})
    for (std::optional<DType> copy_dt :
         {std::optional<DType>(), std::optional(DType::bf16), std::optional(DType::f16)}) {
      SCOPED_TRACE(std::string("grad ") + dtype_name(grad_dt) + ", copy " +
                   (copy_dt ? dtype_name(*copy_dt) : "none"));
      const Shape shape = {1025, 33};
      const Tensor p = rand_normal(shape, 10), m = Tensor::zeros(shape), v = Tensor::zeros(shape);
      const Tensor ep = p.clone(), em = m.clone(), ev = v.clone();
      const Tensor ecopy = copy_dt ? Tensor::full(shape, NAN, *copy_dt) : Tensor();
      for (int64_t step = 1; step <= 3; ++step) {
        const AdamWParams hp{.lr = 1e-2,
                             .beta1 = 0.9,
                             .beta2 = 0.95,
                             .eps = 1e-8,
                             .weight_decay = 0.1,
                             .step = step,
                             .grad_scale = step == 2 ? 0.3 : 1.0};  // step 2: a clipped one
        const Tensor g = rand_uniform(shape, -1, 1, 20 + step, grad_dt);
        adamw_step(p, g, m, v, hp);
        cuda::adamw(ep, g, em, ev, ecopy, hp, nullptr);
      }
      // A few correctly rounded ops per element with the same scalars on both devices: scales
      // well below the values' sizes (p ~ 1, m ~ 0.1, v ~ 0.05).
      EXPECT_EMU_PARITY(ep, p, 1, 0.1);
      EXPECT_EMU_PARITY(em, m, 1, 1e-2);
      EXPECT_EMU_PARITY(ev, v, 1, 1e-3);
      if (copy_dt) {
        EXPECT_TRUE(all_close(ecopy, ep.to(*copy_dt), 0.0));  // the copy is the updated param
      }
    }
}

}  // namespace
}  // namespace sprig
