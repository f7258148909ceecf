#include "tensor/random.h"

#include <cmath>
#include <stdexcept>

namespace sprig {

// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3"): the 128-bit
// counter is (offset, 0), the key is the 64-bit seed.
std::array<uint32_t, 4> Generator::block(uint64_t counter) const {
  std::array<uint32_t, 4> c = {static_cast<uint32_t>(counter), static_cast<uint32_t>(counter >> 32),
                               0u, 0u};
  uint32_t k0 = static_cast<uint32_t>(seed_), k1 = static_cast<uint32_t>(seed_ >> 32);
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = 0xD2511F53ull * c[0], p1 = 0xCD9E8D57ull * c[2];
    c = {static_cast<uint32_t>(p1 >> 32) ^ c[1] ^ k0, static_cast<uint32_t>(p1),
         static_cast<uint32_t>(p0 >> 32) ^ c[3] ^ k1, static_cast<uint32_t>(p0)};
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return c;
}

uint32_t Generator::next_u32() {
  if (offset_ / 4 != cached_block_) {
    cached_block_ = offset_ / 4;
    buffer_ = block(cached_block_);
  }
  return buffer_[offset_++ % 4];
}

double Generator::next_uniform() {
  const uint64_t hi = next_u32() >> 5, lo = next_u32() >> 6;  // 27 + 26 bits
  return (static_cast<double>(hi) * 67108864.0 + static_cast<double>(lo)) / 9007199254740992.0;
}

double Generator::next_normal() {
  const double u1 = 1.0 - next_uniform();  // (0, 1]
  const double u2 = next_uniform();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
}

int64_t Generator::next_int(int64_t low, int64_t high) {
  if (high <= low)
    throw std::invalid_argument("[randint] empty range [" + std::to_string(low) + ", " +
                                std::to_string(high) + ")");
  const uint64_t range = static_cast<uint64_t>(high - low);
  const uint64_t limit = UINT64_MAX - UINT64_MAX % range;  // rejection keeps it unbiased
  uint64_t r;
  do {
    r = (static_cast<uint64_t>(next_u32()) << 32) | next_u32();
  } while (r >= limit);
  return low + static_cast<int64_t>(r % range);
}

Generator& default_generator() {
  static Generator gen(0);
  return gen;
}

void manual_seed(uint64_t seed) { default_generator().set_state(seed, 0); }

namespace {
template <class Draw> Tensor draw(const Shape& shape, DType dtype, Device device, Draw&& f) {
  std::vector<double> v(static_cast<size_t>(shape_numel(shape)));
  for (double& x : v) x = f();
  return Tensor::from_vector(v, shape, dtype, device);
}
}  // namespace

Tensor uniform(const Shape& shape, double low, double high, DType dtype, Device device,
               Generator& gen) {
  return draw(shape, dtype, device, [&] { return low + (high - low) * gen.next_uniform(); });
}

Tensor normal(const Shape& shape, double mean, double stddev, DType dtype, Device device,
              Generator& gen) {
  return draw(shape, dtype, device, [&] { return mean + stddev * gen.next_normal(); });
}

Tensor randint(const Shape& shape, int64_t low, int64_t high, DType dtype, Device device,
               Generator& gen) {
  std::vector<int64_t> v(static_cast<size_t>(shape_numel(shape)));
  for (int64_t& x : v) x = gen.next_int(low, high);
  return Tensor::from_vector(v, shape, dtype, device);
}

}  // namespace sprig
