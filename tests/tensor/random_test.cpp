// Seeded random numbers (Philox4x32-10): reproducibility, state save/restore, distribution
// moments of uniform/normal/randint tensors, and CPU memory accounting of storages.
#include "tensor/random.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <vector>

#include "tensor/storage.h"
#include "tests/test_util.h"

namespace sprig {
namespace {

std::vector<uint32_t> draw_u32(Generator& gen, int n) {
  std::vector<uint32_t> v(static_cast<size_t>(n));
  for (uint32_t& x : v) x = gen.next_u32();
  return v;
}

// Mean and (population) variance of values.
std::pair<double, double> moments(const std::vector<double>& v) {
  double mean = 0, var = 0;
  for (double x : v) mean += x;
  mean /= static_cast<double>(v.size());
  for (double x : v) var += (x - mean) * (x - mean);
  return {mean, var / static_cast<double>(v.size())};
}

TEST(Random, MatchesThePhiloxReferenceVector) {
  // Random123's known-answer test for philox4x32-10 with zero key and zero counter.
  Generator gen(0);
  EXPECT_EQ(draw_u32(gen, 4),
            (std::vector<uint32_t>{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}));
}

TEST(Random, SameSeedSameStreamDifferentSeedsDiffer) {
  Generator a(1234), b(1234), c(1235);
  const std::vector<uint32_t> va = draw_u32(a, 64), vb = draw_u32(b, 64), vc = draw_u32(c, 64);
  EXPECT_EQ(va, vb);
  int same = 0;
  for (size_t i = 0; i < va.size(); ++i) same += va[i] == vc[i];
  EXPECT_EQ(same, 0);
}

TEST(Random, SetStateResumesAtABlockBoundary) {
  Generator gen(99);
  draw_u32(gen, 8);  // two full blocks
  const uint64_t seed = gen.seed(), offset = gen.offset();
  const std::vector<uint32_t> expected = draw_u32(gen, 10);
  Generator resumed(7);
  draw_u32(resumed, 3);  // a partly used buffer must not leak into the restored stream
  resumed.set_state(seed, offset);
  EXPECT_EQ(draw_u32(resumed, 10), expected);
}

TEST(Random, SetStateResumesMidBlock) {
  // Tensor draws consume two words per uniform, so a checkpoint can land inside a block.
  Generator gen(5);
  gen.next_uniform();
  gen.next_u32();  // three words: one left in the current block
  const uint64_t seed = gen.seed(), offset = gen.offset();
  const std::vector<uint32_t> expected = draw_u32(gen, 6);
  Generator resumed;
  resumed.set_state(seed, offset);
  EXPECT_EQ(draw_u32(resumed, 6), expected);
}

TEST(Random, TensorDrawsAreReproducible) {
  Generator g1(42), g2(42);
  const Tensor a = uniform({3, 5}, -1.0, 1.0, DType::f32, Device::cpu(), g1);
  const Tensor b = uniform({3, 5}, -1.0, 1.0, DType::f32, Device::cpu(), g2);
  EXPECT_EQ(a.to_vector<float>(), b.to_vector<float>());
  // The next draw continues the stream instead of repeating it.
  const Tensor c = uniform({3, 5}, -1.0, 1.0, DType::f32, Device::cpu(), g1);
  EXPECT_NE(a.to_vector<float>(), c.to_vector<float>());

  // manual_seed restarts the default stream, even when the last draw ended inside a block
  // (5 uniforms consume 10 words).
  manual_seed(7);
  const std::vector<double> first = uniform({5}, 0.0, 1.0, DType::f64).to_vector<double>();
  manual_seed(7);
  EXPECT_EQ(uniform({5}, 0.0, 1.0, DType::f64).to_vector<double>(), first);
  Generator fresh(7);
  EXPECT_EQ(uniform({5}, 0.0, 1.0, DType::f64, Device::cpu(), fresh).to_vector<double>(), first);
}

TEST(Random, UniformRangeAndMoments) {
  Generator gen(3);
  const Tensor t = uniform({100000}, -2.0, 3.0, DType::f64, Device::cpu(), gen);
  EXPECT_EQ(t.dtype(), DType::f64);
  const std::vector<double> v = t.to_vector<double>();
  EXPECT_GE(*std::min_element(v.begin(), v.end()), -2.0);
  EXPECT_LT(*std::max_element(v.begin(), v.end()), 3.0);
  const auto [mean, var] = moments(v);
  EXPECT_NEAR(mean, 0.5, 0.02);  // standard error 0.0046
  EXPECT_NEAR(var, 25.0 / 12.0, 0.03);
}

TEST(Random, NormalMoments) {
  Generator gen(11);
  const std::vector<double> v =
      normal({100000}, 1.5, 2.0, DType::f64, Device::cpu(), gen).to_vector<double>();
  const auto [mean, var] = moments(v);
  EXPECT_NEAR(mean, 1.5, 0.03);  // standard error 0.0063
  EXPECT_NEAR(std::sqrt(var), 2.0, 0.03);
  // About 68.3% of draws fall within one standard deviation.
  const double inside = static_cast<double>(std::count_if(
                            v.begin(), v.end(), [](double x) { return std::abs(x - 1.5) < 2.0; })) /
                        static_cast<double>(v.size());
  EXPECT_NEAR(inside, 0.6827, 0.01);
}

TEST(Random, RandintBoundsAndCoverage) {
  Generator gen(8);
  const Tensor t = randint({16000}, -3, 5, DType::i32, Device::cpu(), gen);
  EXPECT_EQ(t.dtype(), DType::i32);
  std::vector<int> counts(8, 0);
  for (int32_t x : t.to_vector<int32_t>()) {
    ASSERT_GE(x, -3);
    ASSERT_LT(x, 5);
    ++counts[static_cast<size_t>(x + 3)];
  }
  for (int c : counts) EXPECT_NEAR(c, 2000, 200);  // standard deviation 42
}

TEST(Random, RandintRejectsAnEmptyRange) {
  Generator gen(1);
  EXPECT_THROW(gen.next_int(4, 4), std::invalid_argument);
  EXPECT_EQ(testing::invalid_argument_message([] { randint({2}, 5, 2); }),
            "[randint] empty range [5, 2)");
}

TEST(CpuMemory, AllocatedGrowsAndShrinks) {
  const size_t before = cpu_memory_allocated();
  {
    const Tensor a = Tensor::empty({1000, 250}, DType::f32);  // 1,000,000 bytes
    EXPECT_EQ(cpu_memory_allocated(), before + 1000000);
    {
      const Tensor b = Tensor::empty({10}, DType::f64);
      EXPECT_EQ(cpu_memory_allocated(), before + 1000080);
    }
    EXPECT_EQ(cpu_memory_allocated(), before + 1000000);
    const Tensor view = a.t();  // views share storage and allocate nothing
    EXPECT_EQ(cpu_memory_allocated(), before + 1000000);
    EXPECT_GE(cpu_memory_peak(), before + 1000080);
  }
  EXPECT_EQ(cpu_memory_allocated(), before);
}

}  // namespace
}  // namespace sprig
