// GPU parity tests of the optimizer ops: global norm and clipping, and three AdamW steps with f32
// and bf16 gradients and bf16/f16 compute copies, CUDA against the CPU reference.
#include <gtest/gtest.h>

#include "tensor/ops.h"
#include "tests/tensor/op_test_util.h"
#include "tests/test_util.h"

namespace sprig {
namespace {

using testing::all_close;
using testing::rand_normal;
using testing::rand_uniform;
using testing::throws_invalid;
using testing::to_cuda;

std::vector<Tensor> grads_on(const std::vector<Tensor>& ts, bool cuda) {
  std::vector<Tensor> out;
  for (const Tensor& t : ts) out.push_back(cuda ? to_cuda(t) : t.clone());
  return out;
}

TEST(GlobalNormGpu, MatchesCpu) {
  SPRIG_REQUIRE_CUDA();
  const std::vector<Tensor> ts = {rand_normal({1}, 1), rand_normal({1025}, 2),
                                  rand_normal({97, 33}, 3, DType::bf16), rand_normal({1 << 20}, 4),
                                  Tensor::zeros({0})};
  // fp32 sums on the GPU (f64 on the CPU): within the f32 relative tolerance of the norm.
  const double norm = global_norm(ts);
  EXPECT_NEAR(global_norm(grads_on(ts, true)), norm,
              testing::parity_tolerance(DType::f32).rtol * norm);
}

TEST(ClipGradNormGpu, MatchesCpu) {
  SPRIG_REQUIRE_CUDA();
  const std::vector<Tensor> ts = {rand_normal({17, 31}, 5), rand_normal({4096}, 6),
                                  rand_normal({1025}, 7, DType::bf16)};
  for (double max_norm : {1.0, 1e3}) {
    const std::vector<Tensor> cpu = grads_on(ts, false), gpu = grads_on(ts, true);
    const double norm = clip_grad_norm(cpu, max_norm);
    EXPECT_NEAR(clip_grad_norm(gpu, max_norm), norm,
                testing::parity_tolerance(DType::f32).rtol * norm);
    for (size_t i = 0; i < ts.size(); ++i) EXPECT_PARITY(gpu[i], cpu[i]);
  }
}

TEST(AdamWGpu, MatchesCpuOverThreeSteps) {
  SPRIG_REQUIRE_CUDA();
  for (DType grad_dt : {DType::f32, DType::bf16})
    for (DType copy_dt : {DType::bf16, DType::f16}) {
      SCOPED_TRACE(std::string("grad ") + dtype_name(grad_dt) + ", copy " + dtype_name(copy_dt));
      const Shape shape = {1025, 33};
      const Tensor p = rand_normal(shape, 10), m = Tensor::zeros(shape), v = Tensor::zeros(shape);
      const Tensor gp = to_cuda(p), gm = to_cuda(m), gv = to_cuda(v);
      const Tensor gcopy = Tensor::zeros(shape, copy_dt, Device::cuda());
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
        adamw_step(gp, to_cuda(g), gm, gv, hp, gcopy);
      }
      // A few correctly rounded ops per element with the same scalars on both devices: scales
      // well below the values' sizes (p ~ 1, m ~ 0.1, v ~ 0.05).
      EXPECT_PARITY(gp, p, 1, 0.1);
      EXPECT_PARITY(gm, m, 1, 1e-2);
      EXPECT_PARITY(gv, v, 1, 1e-3);
      EXPECT_TRUE(all_close(gcopy, gp.to(copy_dt), 0.0));  // the copy is the updated parameter
    }
}

TEST(OptimGpu, RejectsMixedDevices) {
  SPRIG_REQUIRE_CUDA();
  const Tensor p = to_cuda(Tensor::zeros({3})), m = to_cuda(Tensor::zeros({3}));
  EXPECT_TRUE(throws_invalid([&] { adamw_step(p, Tensor::zeros({3}), m, m, {}); },
                             "[adamw_step] tensors are on different devices"));
  EXPECT_TRUE(throws_invalid(
      [&] {
        global_norm({p, Tensor::zeros({3})});
      },
      "[global_norm] tensor 1 is on cpu, tensor 0 on cuda:0"));
}

}  // namespace
}  // namespace sprig
