// Argument checks and the device dispatch shared by the op files in tensor/ops/. Every op calls
// its kernel through SPRIG_DISPATCH, the one place where CPU and CUDA paths split.
#pragma once

#include <initializer_list>
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
    fail(op, std::string("dtype mismatch: ") + dtype_name(a.dtype()) + " and " +
                 dtype_name(b.dtype()));
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

// On CPU, 16-bit floats compute in f32: the kernel sees an f32 copy, the result is cast back.
inline bool cpu_upcast(const Tensor& t) {
  return t.device().is_cpu() && (t.dtype() == DType::bf16 || t.dtype() == DType::f16);
}
inline DType compute_dtype(const Tensor& t) { return cpu_upcast(t) ? DType::f32 : t.dtype(); }
inline Tensor for_compute(const Tensor& t) { return t.to(compute_dtype(t)).contiguous(); }

}  // namespace sprig::detail

// Calls cpu::kernel(args...) or cuda::kernel(args..., stream) for the device `dev`.
#define SPRIG_DISPATCH(dev, kernel, ...)                                                   \
  do {                                                                                     \
    const ::sprig::Device dev_ = (dev);                                                    \
    if (dev_.is_cpu()) ::sprig::cpu::kernel(__VA_ARGS__);                                  \
    else ::sprig::cuda::kernel(__VA_ARGS__, ::sprig::cuda::current_stream(dev_.index));    \
  } while (0)
