// Element types and devices: DType (f32, f64, bf16, f16, i32, i64, bool), host bf16/f16 value types
// with round-to-nearest-even conversion, and Device (cpu or cuda:N).
#pragma once

#include <cstdint>
#include <cstring>
#include <string>

namespace sprig {

enum class DType : uint8_t { f32, f64, bf16, f16, i32, i64, boolean };

size_t dtype_size(DType t);
const char* dtype_name(DType t);
bool is_floating(DType t);                       // f32, f64, bf16, f16
DType dtype_from_name(const std::string& name);  // "f32", "bf16", ...; throws on unknown

// bfloat16 storage type: the upper 16 bits of an IEEE float.
struct bf16 {
  uint16_t bits = 0;
  bf16() = default;
  explicit bf16(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) {  // NaN stays a (quiet) NaN
      bits = static_cast<uint16_t>((u >> 16) | 0x40);
    } else {
      u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest even
      bits = static_cast<uint16_t>(u >> 16);
    }
  }
  operator float() const {
    uint32_t u = static_cast<uint32_t>(bits) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
};

// IEEE half storage type.
struct f16 {
  uint16_t bits = 0;
  f16() = default;
  explicit f16(float f);
  operator float() const;
};

template <class T> constexpr DType dtype_of();
template <> constexpr DType dtype_of<float>() { return DType::f32; }
template <> constexpr DType dtype_of<double>() { return DType::f64; }
template <> constexpr DType dtype_of<bf16>() { return DType::bf16; }
template <> constexpr DType dtype_of<f16>() { return DType::f16; }
template <> constexpr DType dtype_of<int32_t>() { return DType::i32; }
template <> constexpr DType dtype_of<int64_t>() { return DType::i64; }
template <> constexpr DType dtype_of<bool>() { return DType::boolean; }

struct Device {
  enum Kind : uint8_t { CPU, CUDA } kind = CPU;
  int index = 0;
  static Device cpu() { return {CPU, 0}; }
  static Device cuda(int i = 0) { return {CUDA, i}; }
  bool is_cpu() const { return kind == CPU; }
  bool is_cuda() const { return kind == CUDA; }
  bool operator==(const Device& o) const { return kind == o.kind && index == o.index; }
  std::string str() const;
};

// "cpu", "cuda" or "auto" (CUDA device 0 when one is present, else the CPU); throws
// std::invalid_argument for "cuda" without a CUDA device or for any other name.
Device resolve_device(const std::string& name);

// Calls f(T{}) with T the C++ type of a runtime dtype (all seven types).
template <class F> decltype(auto) visit_dtype(DType t, F&& f) {
  switch (t) {
    case DType::f32: return f(float{});
    case DType::f64: return f(double{});
    case DType::bf16: return f(bf16{});
    case DType::f16: return f(f16{});
    case DType::i32: return f(int32_t{});
    case DType::i64: return f(int64_t{});
    case DType::boolean: return f(bool{});
  }
  return f(float{});
}

}  // namespace sprig
