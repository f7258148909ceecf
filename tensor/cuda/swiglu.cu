// CUDA SwiGLU, forward and backward (twin of tensor/cpu/swiglu.cpp).
// Layout: gate, up, out, dout, dgate, dup share one shape, contiguous; elementwise over n
// elements in grid-stride loops, with 16-byte vector accesses when n and every pointer allow.
// Backward rule: `=` into activation gradients (dgate, dup).
#include "tensor/cuda/common.cuh"

namespace sprig::cuda {

namespace {

constexpr int kThreads = 256;

template <class A> __device__ __forceinline__ A sigmoid(A v) { return A(1) / (A(1) + ::exp(-v)); }

// out = silu(gate) * up over n / N vectors of N elements.
template <class T, int N>
__global__ void swiglu_kernel(const T* __restrict__ gate, const T* __restrict__ up,
                              T* __restrict__ out, int64_t vectors) {
  using A = acc_t<T>;
  using V = Vec<T, N>;
  for (int64_t k = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; k < vectors;
       k += int64_t(gridDim.x) * blockDim.x) {
    const V g = reinterpret_cast<const V*>(gate)[k], u = reinterpret_cast<const V*>(up)[k];
    V o;
    for (int j = 0; j < N; ++j) {
      const A gj = to_acc(g.v[j]);
      o.v[j] = from_acc<T>(gj * sigmoid(gj) * to_acc(u.v[j]));
    }
    reinterpret_cast<V*>(out)[k] = o;
  }
}

// dgate = dout * up * silu'(gate), silu'(g) = s * (1 + g * (1 - s)); dup = dout * silu(gate).
template <class T, int N>
__global__ void swiglu_backward_kernel(const T* __restrict__ gate, const T* __restrict__ up,
                                       const T* __restrict__ dout, T* __restrict__ dgate,
                                       T* __restrict__ dup, int64_t vectors) {
  using A = acc_t<T>;
  using V = Vec<T, N>;
  for (int64_t k = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; k < vectors;
       k += int64_t(gridDim.x) * blockDim.x) {
    const V g = reinterpret_cast<const V*>(gate)[k], u = reinterpret_cast<const V*>(up)[k];
    const V d = reinterpret_cast<const V*>(dout)[k];
    V dg, du;
    for (int j = 0; j < N; ++j) {
      const A gj = to_acc(g.v[j]), s = sigmoid(gj), dj = to_acc(d.v[j]);
      dg.v[j] = from_acc<T>(dj * to_acc(u.v[j]) * s * (A(1) + gj * (A(1) - s)));
      du.v[j] = from_acc<T>(dj * gj * s);
    }
    reinterpret_cast<V*>(dgate)[k] = dg;
    reinterpret_cast<V*>(dup)[k] = du;
  }
}

}  // namespace

void swiglu(const Tensor& gate, const Tensor& up, const Tensor& out, cudaStream_t stream) {
  const int64_t n = gate.numel();
  visit_floating(gate.dtype(), "swiglu", [&](auto tag) {
    using T = decltype(tag);
    const T* gp = static_cast<const T*>(gate.data_ptr());
    const T* upp = static_cast<const T*>(up.data_ptr());
    T* op = static_cast<T*>(out.data_ptr());
    with_vec_width<T>(n, {gp, upp, op}, [&](auto width) {
      constexpr int N = decltype(width)::value;
      const int64_t vectors = n / N;
      launch(swiglu_kernel<T, N>, grid_for(vectors, kThreads), kThreads, 0, stream, gp, upp, op,
             vectors);
    });
  });
  CUDA_CHECK(cudaGetLastError());
}

void swiglu_backward(const Tensor& gate, const Tensor& up, const Tensor& dout, const Tensor& dgate,
                     const Tensor& dup, cudaStream_t stream) {
  const int64_t n = gate.numel();
  visit_floating(gate.dtype(), "swiglu_backward", [&](auto tag) {
    using T = decltype(tag);
    const T* gp = static_cast<const T*>(gate.data_ptr());
    const T* upp = static_cast<const T*>(up.data_ptr());
    const T* dp = static_cast<const T*>(dout.data_ptr());
    T* dgp = static_cast<T*>(dgate.data_ptr());
    T* dup_p = static_cast<T*>(dup.data_ptr());
    with_vec_width<T>(n, {gp, upp, dp, dgp, dup_p}, [&](auto width) {
      constexpr int N = decltype(width)::value;
      const int64_t vectors = n / N;
      launch(swiglu_backward_kernel<T, N>, grid_for(vectors, kThreads), kThreads, 0, stream, gp,
             upp, dp, dgp, dup_p, vectors);
    });
  });
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace sprig::cuda
