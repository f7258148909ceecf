// CPU-vs-CUDA parity of the LM-head losses over chosen rows (linear_cross_entropy_at, with shared
// and skipped rows and its entropies) and of the policy-gradient loss with PPO clipping: values
// and gradients in f32.
#include <gtest/gtest.h>

#include "autograd/functions.h"
#include "nn/loss.h"
#include "tests/test_util.h"

namespace sprig {
namespace {

TEST(LossGpu, LinearCrossEntropyAtAndPolicyGradientMatchTheCpu) {
  SPRIG_REQUIRE_CUDA();
  constexpr int64_t N = 40, H = 64, V = 1000;
  const std::vector<int64_t> rows = {0, 3, 3, 3, 7, 8, 20, 20, 39};
  const int64_t K = static_cast<int64_t>(rows.size());
  const Tensor h0 = testing::rand_normal({N, H}, 1), w0 = testing::rand_normal({V, H}, 2);
  const Tensor targets = Tensor::from_vector<int64_t>({5, 999, 0, 5, 17, 400, 1, 2, 3}, {K});
  const Tensor advantages = testing::rand_normal({K}, 3);
  // Old log-probs around the current ones, so ratios fall on both sides of the clip.
  const Tensor old = add(linear_cross_entropy_at(Var(h0), Var(w0), rows, targets).value(),
                         mul(testing::rand_normal({K}, 4), 0.3));
  const Tensor old_logp = neg(old);
  struct Result {
    Tensor loss, entropy, dh, dw;
  };
  const auto run = [&](Device device) {
    Var h(h0.to(device), true), w(w0.to(device), true);
    Tensor entropy;
    const Var nll =
        linear_cross_entropy_at(h, w, rows, targets.to(device), /*chunk_rows=*/7, &entropy);
    const Var loss = policy_gradient_losses(neg(nll), advantages, old_logp, 0.2);
    sum_all(loss).backward();
    return Result{loss.value().to(Device::cpu()), entropy.to(Device::cpu()),
                  h.grad().to(Device::cpu()), w.grad().to(Device::cpu())};
  };
  const Result cpu = run(Device::cpu()), gpu = run(Device::cuda());
  EXPECT_TRUE(testing::all_close(gpu.loss, cpu.loss, 1e-4, 1e-4));
  EXPECT_TRUE(testing::all_close(gpu.entropy, cpu.entropy, 1e-4, 1e-4));
  EXPECT_TRUE(testing::all_close(gpu.dh, cpu.dh, 1e-4, 1e-4));
  EXPECT_TRUE(testing::all_close(gpu.dw, cpu.dw, 1e-4, 1e-4));
}

}  // namespace
}  // namespace sprig
