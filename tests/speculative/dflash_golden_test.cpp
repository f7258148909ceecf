// DFlash draft training against PyTorch (tests/golden/make_dflash_golden.py): unpacked rows,
// packed rows (two documents, per-document positions and context), the variable-prefix loss, and
// YaRN positions on target and draft (transformers' frequencies and scale), each in f64 (the
// semantics, to rounding) and f32 (the precision training runs at).
#include "tests/speculative/dflash_golden_check.h"

namespace sprig::testing {
namespace {

// RoPE's cos/sin are f32 in both (as HF computes them), but PyTorch's vectorised f32 cos can be
// an ulp off the correctly rounded one sprig uses: f64 runs agree to ~1e-7, not to f64 rounding.
constexpr GoldenTolerance kF64{1e-6, 1e-8, 1e-6};
constexpr GoldenTolerance kF32{1e-4, 1e-5, 1e-3};

TEST(DFlashGolden, UnpackedF64) {
  check_dflash_golden("unpacked", Device::cpu(), DType::f64, kF64);
}
TEST(DFlashGolden, PackedF64) { check_dflash_golden("packed", Device::cpu(), DType::f64, kF64); }
TEST(DFlashGolden, VariablePrefixF64) {
  check_dflash_golden("prefix", Device::cpu(), DType::f64, kF64);
}
TEST(DFlashGolden, YarnPositionsF64) {
  check_dflash_golden("yarn", Device::cpu(), DType::f64, kF64);
}
TEST(DFlashGolden, UnpackedF32) {
  check_dflash_golden("unpacked", Device::cpu(), DType::f32, kF32);
}
TEST(DFlashGolden, PackedF32) { check_dflash_golden("packed", Device::cpu(), DType::f32, kF32); }
TEST(DFlashGolden, VariablePrefixF32) {
  check_dflash_golden("prefix", Device::cpu(), DType::f32, kF32);
}
TEST(DFlashGolden, YarnPositionsF32) {
  check_dflash_golden("yarn", Device::cpu(), DType::f32, kF32);
}

}  // namespace
}  // namespace sprig::testing
