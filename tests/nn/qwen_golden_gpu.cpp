// Golden parity on CUDA in bf16 (weights, activations and attention in bf16, fp32 accumulation):
// errors of bf16 training, a few units of bf16's 2^-8 relative precision across two layers.
#include "tests/nn/golden_check.h"

namespace sprig::testing {
namespace {

constexpr GoldenTolerance kBf16{3e-2, 1e-2, 8e-2};

TEST(QwenGoldenGpu, Qwen3MatchesPyTorchInBf16) {
  SPRIG_REQUIRE_CUDA();
  check_golden_model("qwen3_tiny", Device::cuda(), DType::bf16, kBf16);
}
TEST(QwenGoldenGpu, Qwen2MatchesPyTorchInBf16) {
  SPRIG_REQUIRE_CUDA();
  check_golden_model("qwen2_tiny", Device::cuda(), DType::bf16, kBf16);
}
TEST(QwenGoldenGpu, Qwen3MatchesPyTorchInF32) {  // f32 weights; attention rounds to bf16
  SPRIG_REQUIRE_CUDA();
  check_golden_model("qwen3_tiny", Device::cuda(), DType::f32, {1e-2, 5e-3, 5e-2});
}

}  // namespace
}  // namespace sprig::testing
