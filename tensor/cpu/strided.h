// Strided iteration shared by CPU kernels: maps a row-major linear index of `shape` to element
// offsets of tensors with arbitrary strides (including the 0 strides of broadcast views); element
// conversions and the floating-dtype visitor.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>

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

// v rounded to T's precision, kept in the compute type A (identity for f32/f64): the roundings to
// the activation dtype that HF's numerics make between fp32 steps.
template <class T, class A> inline A round_to(A v) { return convert<A>(convert<T>(v)); }

// Minimum number of elements before an elementwise loop is split across OpenMP threads.
constexpr int64_t kParallelGrain = 1 << 15;

// Accumulation type of a floating element type: double for f64, float otherwise.
template <class T> using acc_t = std::conditional_t<std::is_same_v<T, double>, double, float>;

// Calls f(T{}) with T the C++ type of a floating dtype (f32, f64, bf16, f16); throws
// "[op] unsupported dtype ..." for the others.
template <class F> void visit_floating(DType t, const char* op, F&& f) {
  switch (t) {
    case DType::f32: f(float{}); return;
    case DType::f64: f(double{}); return;
    case DType::bf16: f(bf16{}); return;
    case DType::f16: f(f16{}); return;
    default:
      throw std::invalid_argument(std::string("[") + op + "] unsupported dtype " + dtype_name(t));
  }
}

// Calls f(T{}) with T float or double: the dtypes of kernels whose dispatcher converts 16-bit
// floats to f32 first. Throws "[op] unsupported dtype ..." for the others.
template <class F> void visit_f32_f64(DType t, const char* op, F&& f) {
  switch (t) {
    case DType::f32: f(float{}); return;
    case DType::f64: f(double{}); return;
    default:
      throw std::invalid_argument(std::string("[") + op + "] unsupported dtype " + dtype_name(t));
  }
}

}  // namespace sprig::cpu
