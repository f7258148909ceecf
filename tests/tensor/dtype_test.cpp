// DType metadata, Device names, and the host bf16/f16 conversions, checked bit for bit against
// hand-computed IEEE patterns (round to nearest even, subnormals, infinities, NaN, overflow).
#include "tensor/dtype.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "tests/test_util.h"

namespace sprig {
namespace {

float float_from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

uint16_t bf16_bits(float f) { return bf16(f).bits; }
uint16_t f16_bits(float f) { return f16(f).bits; }

float from_bf16_bits(uint16_t b) {
  bf16 h;
  h.bits = b;
  return h;
}

float from_f16_bits(uint16_t b) {
  f16 h;
  h.bits = b;
  return h;
}

constexpr float kInf = std::numeric_limits<float>::infinity();

TEST(DType, SizesNamesAndKinds) {
  EXPECT_EQ(dtype_size(DType::f32), 4u);
  EXPECT_EQ(dtype_size(DType::f64), 8u);
  EXPECT_EQ(dtype_size(DType::bf16), 2u);
  EXPECT_EQ(dtype_size(DType::f16), 2u);
  EXPECT_EQ(dtype_size(DType::i32), 4u);
  EXPECT_EQ(dtype_size(DType::i64), 8u);
  EXPECT_EQ(dtype_size(DType::boolean), 1u);
  for (DType t :
       {DType::f32, DType::f64, DType::bf16, DType::f16, DType::i32, DType::i64, DType::boolean})
    EXPECT_EQ(dtype_from_name(dtype_name(t)), t) << dtype_name(t);
  EXPECT_TRUE(is_floating(DType::bf16));
  EXPECT_TRUE(is_floating(DType::f64));
  EXPECT_FALSE(is_floating(DType::i32));
  EXPECT_FALSE(is_floating(DType::boolean));
}

TEST(DType, UnknownNameIsAClearError) {
  EXPECT_EQ(testing::invalid_argument_message([] { dtype_from_name("float8"); }),
            "[dtype] unknown dtype 'float8' (expected f32, f64, bf16, f16, i32, i64 or bool)");
}

TEST(DType, DeviceNames) {
  EXPECT_EQ(Device::cpu().str(), "cpu");
  EXPECT_EQ(Device::cuda(1).str(), "cuda:1");
  EXPECT_TRUE(Device::cuda(0) == Device::cuda());
  EXPECT_FALSE(Device::cuda(0) == Device::cuda(1));
  EXPECT_FALSE(Device::cpu() == Device::cuda(0));
}

// ---- bf16 -------------------------------------------------------------------------------------

TEST(BF16, ExactValuesKeepTheUpperHalf) {
  EXPECT_EQ(bf16_bits(1.0f), 0x3f80);
  EXPECT_EQ(bf16_bits(-2.0f), 0xc000);
  EXPECT_EQ(bf16_bits(0.0f), 0x0000);
  EXPECT_EQ(bf16_bits(-0.0f), 0x8000);
  EXPECT_EQ(bf16_bits(0.15625f), 0x3e20);  // 1.25 * 2^-3
}

TEST(BF16, RoundsToNearestEven) {
  EXPECT_EQ(bf16_bits(float_from_bits(0x3f807fff)), 0x3f80);  // below half: down
  EXPECT_EQ(bf16_bits(float_from_bits(0x3f808001)), 0x3f81);  // above half: up
  EXPECT_EQ(bf16_bits(float_from_bits(0x3f808000)), 0x3f80);  // tie, 0x3f80 is even
  EXPECT_EQ(bf16_bits(float_from_bits(0x3f818000)), 0x3f82);  // tie, 0x3f81 is odd: up
  EXPECT_EQ(bf16_bits(float_from_bits(0xbf818000)), 0xbf82);  // same on the negative side
  EXPECT_EQ(bf16_bits(float_from_bits(0x3fffffff)), 0x4000);  // carry into the exponent
}

TEST(BF16, SubnormalsInfinitiesAndNaN) {
  EXPECT_EQ(bf16_bits(float_from_bits(0x00010000)), 0x0001);  // smallest bf16 subnormal
  EXPECT_EQ(bf16_bits(float_from_bits(0x00008000)), 0x0000);  // tie to even zero
  EXPECT_EQ(bf16_bits(float_from_bits(0x00018000)), 0x0002);  // tie up to even
  EXPECT_EQ(bf16_bits(kInf), 0x7f80);
  EXPECT_EQ(bf16_bits(-kInf), 0xff80);
  EXPECT_EQ(bf16_bits(float_from_bits(0x7f7fffff)), 0x7f80);  // FLT_MAX rounds to inf
  EXPECT_EQ(bf16_bits(float_from_bits(0x7f7f7fff)), 0x7f7f);  // just below: largest finite
  EXPECT_EQ(bf16_bits(float_from_bits(0x7fc00000)), 0x7fc0);
  // A NaN whose payload sits in the low half must stay NaN, not round to inf.
  EXPECT_EQ(bf16_bits(float_from_bits(0x7f800001)), 0x7fc0);
  EXPECT_TRUE(std::isnan(static_cast<float>(bf16(float_from_bits(0xff800001)))));
}

TEST(BF16, ToFloatIsExact) {
  EXPECT_EQ(bits_of(from_bf16_bits(0x3f80)), 0x3f800000u);
  EXPECT_EQ(bits_of(from_bf16_bits(0x0001)), 0x00010000u);
  EXPECT_EQ(bits_of(from_bf16_bits(0x8000)), 0x80000000u);
  EXPECT_EQ(from_bf16_bits(0xff80), -kInf);
  EXPECT_FLOAT_EQ(from_bf16_bits(0x4049), 3.140625f);
}

// ---- f16 --------------------------------------------------------------------------------------

TEST(F16, NormalValuesAndRounding) {
  EXPECT_EQ(f16_bits(1.0f), 0x3c00);
  EXPECT_EQ(f16_bits(-2.0f), 0xc000);
  EXPECT_EQ(f16_bits(-0.0f), 0x8000);
  EXPECT_EQ(f16_bits(0.333333f), 0x3555);
  EXPECT_EQ(f16_bits(float_from_bits(0x3f801000)), 0x3c00);  // 1 + 2^-11: tie to even
  EXPECT_EQ(f16_bits(float_from_bits(0x3f801001)), 0x3c01);  // just above the tie
  EXPECT_EQ(f16_bits(float_from_bits(0x3f803000)), 0x3c02);  // 1 + 3 * 2^-11: tie up to even
  EXPECT_EQ(f16_bits(float_from_bits(0x3fffffff)), 0x4000);  // carry into the exponent
}

TEST(F16, OverflowGoesToInfinity) {
  EXPECT_EQ(f16_bits(65504.0f), 0x7bff);  // largest finite half
  EXPECT_EQ(f16_bits(65519.0f), 0x7bff);  // below the midpoint to 65536
  EXPECT_EQ(f16_bits(65520.0f), 0x7c00);  // the midpoint rounds to even, which is inf
  EXPECT_EQ(f16_bits(1e6f), 0x7c00);
  EXPECT_EQ(f16_bits(-1e6f), 0xfc00);
  EXPECT_EQ(f16_bits(kInf), 0x7c00);
  EXPECT_EQ(f16_bits(-kInf), 0xfc00);
}

TEST(F16, SubnormalsAndUnderflow) {
  const float two_m24 = std::ldexp(1.0f, -24);
  EXPECT_EQ(f16_bits(two_m24), 0x0001);  // smallest subnormal
  EXPECT_EQ(f16_bits(-two_m24), 0x8001);
  EXPECT_EQ(f16_bits(0.5f * two_m24), 0x0000);  // tie to even zero
  EXPECT_EQ(f16_bits(std::nextafter(0.5f * two_m24, 1.0f)), 0x0001);
  EXPECT_EQ(f16_bits(1.5f * two_m24), 0x0002);     // tie up to even
  EXPECT_EQ(f16_bits(1023.0f * two_m24), 0x03ff);  // largest subnormal
  EXPECT_EQ(f16_bits(1023.5f * two_m24), 0x0400);  // rounds up to the smallest normal
  EXPECT_EQ(f16_bits(std::ldexp(1.0f, -14)), 0x0400);
  EXPECT_EQ(f16_bits(std::ldexp(1.0f, -30)), 0x0000);
  EXPECT_EQ(f16_bits(-std::ldexp(1.0f, -30)), 0x8000);
}

TEST(F16, NaN) {
  EXPECT_EQ(f16_bits(float_from_bits(0x7fc00000)), 0x7e00);
  EXPECT_EQ(f16_bits(float_from_bits(0x7f800001)), 0x7e00);
  EXPECT_TRUE(std::isnan(from_f16_bits(0x7e00)));
  EXPECT_TRUE(std::isnan(from_f16_bits(0xfc01)));
}

TEST(F16, ToFloatIsExact) {
  EXPECT_EQ(from_f16_bits(0x3c00), 1.0f);
  EXPECT_EQ(from_f16_bits(0xc000), -2.0f);
  EXPECT_EQ(from_f16_bits(0x3555), 0.333251953125f);
  EXPECT_EQ(from_f16_bits(0x7bff), 65504.0f);
  EXPECT_EQ(from_f16_bits(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(from_f16_bits(0x83ff), -1023.0f * std::ldexp(1.0f, -24));
  EXPECT_EQ(from_f16_bits(0x0400), std::ldexp(1.0f, -14));
  EXPECT_EQ(from_f16_bits(0x7c00), kInf);
  EXPECT_EQ(from_f16_bits(0xfc00), -kInf);
  EXPECT_EQ(bits_of(from_f16_bits(0x8000)), 0x80000000u);
}

TEST(F16, EveryFiniteHalfRoundTrips) {
  for (uint32_t b = 0; b < 0x10000; ++b) {
    const uint16_t bits = static_cast<uint16_t>(b);
    if ((bits & 0x7c00) == 0x7c00) continue;  // inf and NaN are covered above
    ASSERT_EQ(f16_bits(from_f16_bits(bits)), bits) << std::hex << b;
  }
}

TEST(BF16, EveryFiniteBF16RoundTrips) {
  for (uint32_t b = 0; b < 0x10000; ++b) {
    const uint16_t bits = static_cast<uint16_t>(b);
    if ((bits & 0x7f80) == 0x7f80) continue;
    ASSERT_EQ(bf16_bits(from_bf16_bits(bits)), bits) << std::hex << b;
  }
}

}  // namespace
}  // namespace sprig
