// Helpers shared by every .cu file: the device primitives (ptx.cuh), error checking, sprig dtype
// <-> CUDA type mapping, float conversion of 16-bit types, the accumulation type, 16-byte vector
// accesses, warp and block reductions, and the dtype dispatch of launchers.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "tensor/cuda/kernels.h"
#ifdef SPRIG_KERNEL_EMU
#include "tests/kernel_emu/device_emu.h"  // the host emulation of ptx.cuh and the CUDA built-ins
#else
#include "tensor/cuda/ptx.cuh"
#endif

namespace sprig::cuda {

[[noreturn]] void throw_cuda_error(cudaError_t err, const char* expr, const char* file, int line);

#define CUDA_CHECK(expr)                                                                       \
  do {                                                                                         \
    cudaError_t err_ = (expr);                                                                 \
    if (err_ != cudaSuccess) ::sprig::cuda::throw_cuda_error(err_, #expr, __FILE__, __LINE__); \
  } while (0)

// Element type on the device for each floating sprig dtype.
template <class T> struct DeviceType { using type = T; };
template <> struct DeviceType<bf16> { using type = __nv_bfloat16; };
template <> struct DeviceType<f16> { using type = __half; };

__device__ __forceinline__ float to_float(float x) { return x; }
__device__ __forceinline__ float to_float(double x) { return static_cast<float>(x); }
__device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float to_float(__half x) { return __half2float(x); }

template <class T> __device__ __forceinline__ T from_float(float x) { return static_cast<T>(x); }
template <> __device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float x) {
  return __float2bfloat16(x);
}
template <> __device__ __forceinline__ __half from_float<__half>(float x) {
  return __float2half(x);
}

// Accumulation type: double for double, float otherwise.
template <class T> struct AccType { using type = float; };
template <> struct AccType<double> { using type = double; };
template <class T> using acc_t = typename AccType<T>::type;

// Conversions to and from the accumulation type (exact for double, through float otherwise), and
// a value rounded to T's precision but kept in the accumulation type.
template <class T> __device__ __forceinline__ acc_t<T> to_acc(T x) {
  if constexpr (std::is_same_v<T, double>)
    return x;
  else
    return to_float(x);
}
template <class T> __device__ __forceinline__ T from_acc(acc_t<T> x) {
  if constexpr (std::is_same_v<T, double>)
    return x;
  else
    return from_float<T>(x);
}
template <class T> __device__ __forceinline__ acc_t<T> round_to(acc_t<T> x) {
  return to_acc(from_acc<T>(x));
}

// N elements of T moved as one memory access (N = kVec16<T> makes a 16-byte access; N = 1 is a
// plain scalar). A pointer may be read as Vec<T, N> when it is aligned to sizeof(Vec<T, N>).
template <class T, int N> struct alignas(sizeof(T) * N) Vec { T v[N]; };
template <class T> constexpr int kVec16 = 16 / sizeof(T);
// True when every pointer is 16-byte aligned and rows of row_len elements keep that alignment.
template <class T> bool vec16_ok(int64_t row_len, std::initializer_list<const void*> ptrs) {
  if (row_len % kVec16<T> != 0) return false;
  for (const void* p : ptrs)
    if (reinterpret_cast<uintptr_t>(p) % 16 != 0) return false;
  return true;
}
// Calls launch(std::integral_constant<int, N>{}) with N = kVec16<T> when vec16_ok, else N = 1: a
// launcher instantiates its kernel for both access widths in one place.
template <class T, class F>
void with_vec_width(int64_t row_len, std::initializer_list<const void*> ptrs, F&& launch) {
  if (vec16_ok<T>(row_len, ptrs))
    launch(std::integral_constant<int, kVec16<T>>{});
  else
    launch(std::integral_constant<int, 1>{});
}

template <class T> __device__ __forceinline__ T warp_sum(T v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
template <class T> __device__ __forceinline__ T warp_max(T v) {
  // ::max: the device overloads, not sprig::max (the tensor reduction), which hides them here.
  for (int o = 16; o > 0; o >>= 1) v = ::max(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Sum over the block (blockDim.x a multiple of 32, <= 1024); every thread gets the result.
template <class T> __device__ T block_sum(T v) {
  __shared__ T partial[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = warp_sum(v);
  __syncthreads();
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  const int nwarps = blockDim.x >> 5;
  v = lane < nwarps ? partial[lane] : T(0);
  return warp_sum(v);
}
template <class T> __device__ T block_max(T v) {
  __shared__ T partial[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = warp_max(v);
  __syncthreads();
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  const int nwarps = blockDim.x >> 5;
  v = lane < nwarps ? partial[lane] : T(-INFINITY);
  return warp_max(v);
}

// Calls f(T{}) with T the device type of a floating dtype supported by CUDA kernels.
template <class F> void visit_floating(DType t, const char* op, F&& f) {
  switch (t) {
    case DType::f32: f(float{}); return;
    case DType::f64: f(double{}); return;
    case DType::bf16: f(__nv_bfloat16{}); return;
    case DType::f16: f(__half{}); return;
    default:
      throw std::invalid_argument(std::string("[") + op + "] unsupported dtype " + dtype_name(t));
  }
}

// A scratch tensor for a launch on `stream`. The caching allocator orders memory on
// current_stream(device) only, so CUDA scratch on another stream could be handed out again while
// the kernel still runs there: refused with "[op] ...".
inline Tensor scratch_tensor(const char* op, const Shape& shape, DType dtype, Device device,
                             cudaStream_t stream) {
  if (device.is_cuda() && stream != current_stream(device.index))
    throw std::invalid_argument(std::string("[") + op +
                                "] scratch memory is ordered on cuda::current_stream(" +
                                std::to_string(device.index) + "): launch on that stream");
  return Tensor::empty(shape, dtype, device);
}

inline unsigned grid_for(int64_t n, int threads) {
  const int64_t blocks = (n + threads - 1) / threads;
  return static_cast<unsigned>(blocks < 65535 * 16 ? (blocks > 0 ? blocks : 1) : 65535 * 16);
}

}  // namespace sprig::cuda
