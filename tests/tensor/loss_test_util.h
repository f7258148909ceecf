// Inputs shared by the corrected cross-entropy's parity tests (tests/tensor/loss_gpu.cpp on a GPU,
// tests/kernel_emu/loss_emu.cpp on the emulated device).
#pragma once

#include <cstdint>
#include <vector>

#include "tensor/random.h"
#include "tensor/tensor.h"

namespace sprig::testing {

struct RowsVocab {
  int64_t rows, vocab;
};

// Small multiples of 1/4: as Domino's features and projection with E = 4, every correction
// e @ P^T is exact whatever the summation order.
inline Tensor quarter_steps(const Shape& shape, uint64_t seed, DType dtype) {
  std::vector<float> v(static_cast<size_t>(shape[0] * shape[1]));
  Generator gen(seed);
  for (float& x : v) x = 0.25f * static_cast<float>(gen.next_int(-4, 5));
  return Tensor::from_vector(v, shape).to(dtype);
}

}  // namespace sprig::testing
