// Domino and JetSpec draft training against PyTorch (tests/golden/make_draft_heads_golden.py):
// Domino with shifted labels unpacked and packed (a shifted label cut at the document end) and
// unshifted; JetSpec unpacked at T = 1 and packed at T = 2; each in f64 (the semantics, to
// rounding) and f32 (the precision training runs at).
#include "tests/speculative/draft_heads_golden_check.h"

namespace sprig::testing {
namespace {

// As the DFlash golden test's: f64 agrees to ~1e-7 (PyTorch's f32 RoPE tables), f32 to training
// precision.
constexpr GoldenTolerance kF64{1e-6, 1e-8, 1e-6};
constexpr GoldenTolerance kF32{1e-4, 1e-5, 1e-3};

TEST(DraftHeadsGolden, EveryCaseF64) {
  for (const char* name : kHeadGoldenCases)
    check_head_golden(name, Device::cpu(), DType::f64, kF64);
}

TEST(DraftHeadsGolden, EveryCaseF32) {
  for (const char* name : kHeadGoldenCases)
    check_head_golden(name, Device::cpu(), DType::f32, kF32);
}

}  // namespace
}  // namespace sprig::testing
