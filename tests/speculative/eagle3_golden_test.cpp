// EAGLE-3 draft training against PyTorch (tests/golden/make_eagle3_golden.py): unpacked rows,
// a packed row of three documents, and a draft vocabulary of 40 of the target's 96 ids, each in
// f64 (the semantics, to rounding) and f32 (the precision training runs at).
#include "tests/speculative/eagle3_golden_check.h"

namespace sprig::testing {
namespace {

// As the DFlash golden tests: PyTorch's f32 RoPE cos/sin can be an ulp off sprig's.
constexpr GoldenTolerance kF64{1e-6, 1e-8, 1e-6};
constexpr GoldenTolerance kF32{1e-4, 1e-5, 2e-3};

TEST(Eagle3Golden, UnpackedF64) {
  check_eagle3_golden("unpacked", Device::cpu(), DType::f64, kF64);
}
TEST(Eagle3Golden, PackedF64) { check_eagle3_golden("packed", Device::cpu(), DType::f64, kF64); }
TEST(Eagle3Golden, DraftVocabularyF64) {
  check_eagle3_golden("reduced", Device::cpu(), DType::f64, kF64);
}
TEST(Eagle3Golden, UnpackedF32) {
  check_eagle3_golden("unpacked", Device::cpu(), DType::f32, kF32);
}
TEST(Eagle3Golden, PackedF32) { check_eagle3_golden("packed", Device::cpu(), DType::f32, kF32); }
TEST(Eagle3Golden, DraftVocabularyF32) {
  check_eagle3_golden("reduced", Device::cpu(), DType::f32, kF32);
}

}  // namespace
}  // namespace sprig::testing
