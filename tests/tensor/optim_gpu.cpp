// GPU parity tests of the optimizer ops: global norm and clipping, and AdamW (the table of
// tests/parity/optim_cases.h).
#include <gtest/gtest.h>

#include "tensor/ops.h"
#include "tests/parity/optim_cases.h"
#include "tests/tensor/op_test_util.h"
#include "tests/test_util.h"

namespace sprig {
namespace {

using testing::rand_normal;
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

SPRIG_GPU_PARITY_TEST(AdamWGpu, MatchesCpuOverThreeSteps, parity::adamw_cases())

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
