#include "tensor/dtype.h"

#include <cmath>
#include <stdexcept>

#include "tensor/cuda/kernels.h"

namespace sprig {

size_t dtype_size(DType t) {
  switch (t) {
    case DType::f32:
    case DType::i32: return 4;
    case DType::f64:
    case DType::i64: return 8;
    case DType::bf16:
    case DType::f16: return 2;
    case DType::boolean: return 1;
  }
  return 0;
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::f32: return "f32";
    case DType::f64: return "f64";
    case DType::bf16: return "bf16";
    case DType::f16: return "f16";
    case DType::i32: return "i32";
    case DType::i64: return "i64";
    case DType::boolean: return "bool";
  }
  return "?";
}

bool is_floating(DType t) {
  return t == DType::f32 || t == DType::f64 || t == DType::bf16 || t == DType::f16;
}

DType dtype_from_name(const std::string& name) {
  for (DType t :
       {DType::f32, DType::f64, DType::bf16, DType::f16, DType::i32, DType::i64, DType::boolean})
    if (name == dtype_name(t)) return t;
  throw std::invalid_argument("[dtype] unknown dtype '" + name +
                              "' (expected f32, f64, bf16, f16, i32, i64 or bool)");
}

// IEEE binary16 conversions with round-to-nearest-even (subnormals, inf and NaN handled).
f16::f16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t abs = x & 0x7fffffffu;
  if (abs > 0x7f800000u) {
    bits = static_cast<uint16_t>(sign | 0x7e00u);
    return;
  }
  if (abs >= 0x477ff000u) {
    bits = static_cast<uint16_t>(sign | 0x7c00u);
    return;
  }                         // overflow -> inf
  if (abs < 0x38800000u) {  // subnormal half (or zero)
    if (abs < 0x33000000u) {
      bits = static_cast<uint16_t>(sign);
      return;
    }
    const uint32_t mant = (abs & 0x007fffffu) | 0x00800000u;
    const int shift = 126 - static_cast<int>(abs >> 23);  // 14..24
    uint32_t h = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1u), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (h & 1u))) ++h;
    bits = static_cast<uint16_t>(sign | h);
    return;
  }
  uint32_t h = ((abs >> 13) - (112u << 10));
  const uint32_t rem = abs & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;
  bits = static_cast<uint16_t>(sign | h);
}

f16::operator float() const {
  const uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
  const uint32_t exp = (bits >> 10) & 0x1fu, mant = bits & 0x3ffu;
  uint32_t u;
  if (exp == 0) {
    if (mant == 0) {
      u = sign;
    } else {  // subnormal: mant * 2^-24
      const float v = std::ldexp(static_cast<float>(mant), -24);
      return sign ? -v : v;
    }
  } else if (exp == 31) {
    u = sign | 0x7f800000u | (mant << 13);
  } else {
    u = sign | ((exp + 112u) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

Device resolve_device(const std::string& name) {
  const bool has_cuda = cuda::device_count() > 0;
  if (name == "cpu" || (name == "auto" && !has_cuda)) return Device::cpu();
  if (name != "cuda" && name != "auto")
    throw std::invalid_argument("[device] unknown device '" + name + "' (cpu, cuda or auto)");
  if (!has_cuda)
    throw std::invalid_argument("[device] cuda was requested but no CUDA device is present");
  return Device::cuda(0);
}

std::string Device::str() const {
  return kind == CPU ? std::string("cpu") : "cuda:" + std::to_string(index);
}

}  // namespace sprig
