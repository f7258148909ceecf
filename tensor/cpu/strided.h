// Strided iteration shared by CPU kernels: maps a row-major linear index of `shape` to element
// offsets of tensors with arbitrary strides (including the 0 strides of broadcast views).
#pragma once

#include <cstdint>

#include "tensor/tensor.h"

namespace sprig::cpu {

// Element offset (relative to data_ptr()) of row-major linear index `i` for shape/strides.
inline int64_t strided_offset(int64_t i, const Shape& shape, const Shape& strides) {
  int64_t off = 0;
  for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
    const int64_t n = shape[d];
    off += (i % n) * strides[d];
    i /= n;
  }
  return off;
}

// Converts between element types through float/double (ints and bools go through double).
template <class To, class From> inline To convert(From v) {
  if constexpr (std::is_same_v<To, bool>) {
    return static_cast<double>(v) != 0.0;
  } else if constexpr (std::is_same_v<From, bf16> || std::is_same_v<From, f16>) {
    return static_cast<To>(static_cast<float>(v));
  } else if constexpr (std::is_same_v<To, bf16> || std::is_same_v<To, f16>) {
    return To(static_cast<float>(v));
  } else {
    return static_cast<To>(v);
  }
}

// Minimum number of elements before an elementwise loop is split across OpenMP threads.
constexpr int64_t kParallelGrain = 1 << 15;

}  // namespace sprig::cpu
