// The EAGLE-3 golden cases on the GPU in bf16 (the training precision there) and f32.
#include "tests/speculative/eagle3_golden_check.h"

namespace sprig::testing {
namespace {

constexpr GoldenTolerance kBf16{3e-2, 1e-2, 8e-2};
constexpr GoldenTolerance kF32{1e-3, 1e-4, 1e-2};

TEST(Eagle3GoldenGpu, EveryCaseBf16) {
  SPRIG_REQUIRE_CUDA();
  for (const char* name : {"unpacked", "packed", "reduced"})
    check_eagle3_golden(name, Device::cuda(), DType::bf16, kBf16);
}

TEST(Eagle3GoldenGpu, EveryCaseF32) {
  SPRIG_REQUIRE_CUDA();
  for (const char* name : {"unpacked", "packed", "reduced"})
    check_eagle3_golden(name, Device::cuda(), DType::f32, kF32);
}

}  // namespace
}  // namespace sprig::testing
