// CUDA copy (strided, any dtype to any dtype, one device) and fill.
#include "tensor/cuda/strided.cuh"

namespace sprig::cuda {

namespace {

// Conversions through float (16-bit floats), double (f64/ints) or a != 0 test (bool).
template <class To, class From> __device__ __forceinline__ To convert(From v) {
  if constexpr (std::is_same_v<From, __nv_bfloat16> || std::is_same_v<From, __half>) {
    return convert<To>(to_float(v));
  } else if constexpr (std::is_same_v<To, bool>) {
    return v != From(0);
  } else if constexpr (std::is_same_v<To, __nv_bfloat16> || std::is_same_v<To, __half>) {
    return from_float<To>(static_cast<float>(v));
  } else {
    return static_cast<To>(v);
  }
}

template <class S, class D>
__global__ void copy_kernel(const S* src, StridedIndex si, D* dst, StridedIndex di, int64_t n,
                            bool contiguous) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    if (contiguous)
      dst[i] = convert<D>(src[i]);
    else
      dst[di.offset(i)] = convert<D>(src[si.offset(i)]);
  }
}

template <class T> __global__ void fill_kernel(T* dst, T value, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    dst[i] = value;
}

template <class F> void visit_all(DType t, F&& f) {
  switch (t) {
    case DType::f32: f(float{}); return;
    case DType::f64: f(double{}); return;
    case DType::bf16: f(__nv_bfloat16{}); return;
    case DType::f16: f(__half{}); return;
    case DType::i32: f(int32_t{}); return;
    case DType::i64: f(int64_t{}); return;
    case DType::boolean: f(bool{}); return;
  }
}

}  // namespace

void copy(const Tensor& src, const Tensor& dst, cudaStream_t stream) {
  const int64_t n = dst.numel();
  if (n == 0) return;
  const bool contiguous = src.is_contiguous() && dst.is_contiguous();
  if (contiguous && src.dtype() == dst.dtype()) {
    CUDA_CHECK(cudaMemcpyAsync(dst.data_ptr(), src.data_ptr(), dst.nbytes(),
                               cudaMemcpyDeviceToDevice, stream));
    return;
  }
  visit_all(src.dtype(), [&](auto s_tag) {
    visit_all(dst.dtype(), [&](auto d_tag) {
      using S = decltype(s_tag);
      using D = decltype(d_tag);
      launch(copy_kernel<S, D>, grid_for(n, 256), 256, 0, stream,
             static_cast<const S*>(src.data_ptr()), StridedIndex(src),
             static_cast<D*>(dst.data_ptr()), StridedIndex(dst), n, contiguous);
    });
  });
  CUDA_CHECK(cudaGetLastError());
}

void fill(const Tensor& dst, double value, cudaStream_t stream) {
  const int64_t n = dst.numel();
  if (n == 0) return;
  visit_all(dst.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T v;
    if constexpr (std::is_same_v<T, __nv_bfloat16>)
      v = __float2bfloat16(static_cast<float>(value));
    else if constexpr (std::is_same_v<T, __half>)
      v = __float2half(static_cast<float>(value));
    else
      v = static_cast<T>(value);
    launch(fill_kernel<T>, grid_for(n, 256), 256, 0, stream, static_cast<T*>(dst.data_ptr()), v, n);
  });
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace sprig::cuda
