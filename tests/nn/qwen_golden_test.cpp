// Golden parity on the CPU in f32: the tiny Qwen3 (q/k norm, GQA 4:2, untied) and Qwen2 (biases,
// tied) models reproduce PyTorch's logits and loss to 1e-5 and every gradient to 1e-4.
#include "tests/nn/golden_check.h"

namespace sprig::testing {
namespace {

constexpr GoldenTolerance kF32{1e-5, 1e-5, 1e-4};

TEST(QwenGolden, Qwen3MatchesPyTorch) {
  check_golden_model("qwen3_tiny", Device::cpu(), DType::f32, kF32);
}
TEST(QwenGolden, Qwen2MatchesPyTorch) {
  check_golden_model("qwen2_tiny", Device::cpu(), DType::f32, kF32);
}

// bf16 weights and activations on the CPU (each op rounds its result to bf16): the tolerances of
// the GPU bf16 test hold here too.
TEST(QwenGolden, Qwen3InBf16WithinBf16Tolerance) {
  check_golden_model("qwen3_tiny", Device::cpu(), DType::bf16, {3e-2, 1e-2, 8e-2});
}

}  // namespace
}  // namespace sprig::testing
