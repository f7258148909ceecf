// Argument checks and the device dispatch shared by the op files in tensor/ops/ (and the attention
// op). Every op calls its kernel through SPRIG_DISPATCH, the one place where CPU and CUDA split.
#pragma once

#include <initializer_list>
#include <sstream>
#include <stdexcept>
#include <string>

#include "tensor/cpu/kernels.h"
#include "tensor/cuda/kernels.h"

namespace sprig::detail {

[[noreturn]] inline void fail(const char* op, const std::string& msg) {
  throw std::invalid_argument(std::string("[") + op + "] " + msg);
}

inline void check_defined(const char* op, const Tensor& t, const char* name) {
  if (!t.defined()) fail(op, std::string(name) + " is undefined");
}

inline void check_same_device(const char* op, std::initializer_list<const Tensor*> ts) {
  const Tensor* first = *ts.begin();
  for (const Tensor* t : ts)
    if (t->device() != first->device())
      fail(op, "tensors are on different devices: " + first->device().str() + " and " +
                   t->device().str());
}

inline void check_same_dtype(const char* op, const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype())
    fail(op,
         std::string("dtype mismatch: ") + dtype_name(a.dtype()) + " and " + dtype_name(b.dtype()));
}

inline void check_floating(const char* op, const Tensor& t, const char* name) {
  if (!is_floating(t.dtype()))
    fail(op, std::string(name) + " must be a floating tensor, got " + dtype_name(t.dtype()));
}

inline void check_index(const char* op, const Tensor& t, const char* name) {
  if (t.dtype() != DType::i32 && t.dtype() != DType::i64)
    fail(op, std::string(name) + " must be i32 or i64, got " + dtype_name(t.dtype()));
}

inline void check_dim(const char* op, const Tensor& t, int64_t ndim, const char* name) {
  if (t.dim() != ndim)
    fail(op, std::string(name) + " must have " + std::to_string(ndim) + " dimensions, got " +
                 std::to_string(t.dim()) + " (shape " + shape_str(t.shape()) + ")");
}

inline void check_shape(const char* op, const Tensor& t, const Shape& shape, const char* name) {
  if (t.shape() != shape)
    fail(op, std::string(name) + " must have shape " + shape_str(shape) + ", got " +
                 shape_str(t.shape()));
}

// A defined floating tensor.
inline void check_float_input(const char* op, const Tensor& t, const char* name) {
  check_defined(op, t, name);
  check_floating(op, t, name);
}

// Per-row statistics and losses: f32, or f64 for f64 inputs (gradient checks).
inline DType stat_dtype(const Tensor& x) {
  return x.dtype() == DType::f64 ? DType::f64 : DType::f32;
}

// A per-row statistic [rows] of the statistics dtype of x.
inline void check_stat(const char* op, const Tensor& stat, const Tensor& x, int64_t rows,
                       const char* name) {
  check_defined(op, stat, name);
  check_shape(op, stat, {rows}, name);
  if (stat.dtype() != stat_dtype(x))
    fail(op, std::string(name) + " must be " + dtype_name(stat_dtype(x)) + ", got " +
                 dtype_name(stat.dtype()));
}

// A double as the shortest form streams give ("0.5", "1e+06").
inline std::string num_str(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

// On CPU, 16-bit floats compute in f32: the kernel sees an f32 copy, the result is cast back.
inline bool cpu_upcast(const Tensor& t) {
  return t.device().is_cpu() && (t.dtype() == DType::bf16 || t.dtype() == DType::f16);
}
inline DType compute_dtype(const Tensor& t) { return cpu_upcast(t) ? DType::f32 : t.dtype(); }
inline Tensor for_compute(const Tensor& t) { return t.to(compute_dtype(t)).contiguous(); }

[[noreturn]] inline void no_cuda(const char* kernel) {
  throw std::runtime_error(std::string("[") + kernel + "] built without CUDA");
}

}  // namespace sprig::detail

// Calls cpu::kernel(args...) or cuda::kernel(args..., stream) for the device `dev`, the latter with
// `dev` current (a DeviceGuard) and on its current stream. In a build without CUDA the CUDA branch
// is discarded at compile time (so the CUDA twins need no stand-ins) and a CUDA device throws
// "[kernel] built without CUDA".
#define SPRIG_DISPATCH(dev, kernel, ...)                                             \
  do {                                                                               \
    const ::sprig::Device dev_ = (dev);                                              \
    if (dev_.is_cpu()) {                                                             \
      ::sprig::cpu::kernel(__VA_ARGS__);                                             \
    } else if constexpr (::sprig::cuda::kBuilt) {                                    \
      const ::sprig::cuda::DeviceGuard guard_(dev_.index);                           \
      ::sprig::cuda::kernel(__VA_ARGS__, ::sprig::cuda::current_stream(dev_.index)); \
    } else {                                                                         \
      ::sprig::detail::no_cuda(#kernel);                                             \
    }                                                                                \
  } while (0)
