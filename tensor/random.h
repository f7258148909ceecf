// Seeded random numbers: a counter-based Philox4x32-10 generator whose state is (seed, offset), so
// the same seed gives the same stream on every machine and device, and the state is two integers
// (seed, words consumed) a checkpoint can store and resume exactly, even in the middle of a block.
// Values are drawn on the host and moved to the tensor's device.
#pragma once

#include <array>
#include <cstdint>

#include "tensor/tensor.h"

namespace sprig {

class Generator {
 public:
  explicit Generator(uint64_t seed = 0) : seed_(seed) {}
  uint64_t seed() const { return seed_; }
  uint64_t offset() const { return offset_; }  // number of 32-bit words consumed
  void set_state(uint64_t seed, uint64_t offset) {
    seed_ = seed;
    offset_ = offset;
    cached_block_ = UINT64_MAX;
  }

  uint32_t next_u32();
  double next_uniform();                        // [0, 1) with 53 random bits
  double next_normal();                         // standard normal (Box-Muller on two uniforms)
  int64_t next_int(int64_t low, int64_t high);  // uniform in [low, high), unbiased

 private:
  std::array<uint32_t, 4> block(uint64_t counter) const;
  uint64_t seed_ = 0, offset_ = 0;
  std::array<uint32_t, 4> buffer_{};
  uint64_t cached_block_ = UINT64_MAX;  // index of the 128-bit block held in buffer_
};

// The process-wide default generator (seeded with 0 until manual_seed is called).
Generator& default_generator();
void manual_seed(uint64_t seed);

Tensor uniform(const Shape& shape, double low, double high, DType dtype = DType::f32,
               Device device = Device::cpu(), Generator& gen = default_generator());
Tensor normal(const Shape& shape, double mean, double stddev, DType dtype = DType::f32,
              Device device = Device::cpu(), Generator& gen = default_generator());
Tensor randint(const Shape& shape, int64_t low, int64_t high, DType dtype = DType::i64,
               Device device = Device::cpu(), Generator& gen = default_generator());

}  // namespace sprig
