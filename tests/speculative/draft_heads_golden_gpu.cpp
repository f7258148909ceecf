// The Domino and JetSpec golden cases on the GPU in bf16 (the training precision there) and f32:
// the GRU, the fused head loss and the forward KL on CUDA against PyTorch's f64 numbers.
#include "tests/speculative/draft_heads_golden_check.h"

namespace sprig::testing {
namespace {

constexpr GoldenTolerance kBf16{3e-2, 1e-2, 8e-2};
constexpr GoldenTolerance kF32{1e-3, 1e-4, 1e-2};
TEST(DraftHeadsGoldenGpu, EveryCaseBf16) {
  SPRIG_REQUIRE_CUDA();
  for (const char* name : kHeadGoldenCases)
    check_head_golden(name, Device::cuda(), DType::bf16, kBf16);
}

TEST(DraftHeadsGoldenGpu, EveryCaseF32) {
  SPRIG_REQUIRE_CUDA();
  for (const char* name : kHeadGoldenCases)
    check_head_golden(name, Device::cuda(), DType::f32, kF32);
}

}  // namespace
}  // namespace sprig::testing
