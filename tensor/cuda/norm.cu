// CUDA RMSNorm with HF numerics, forward and backward (twin of tensor/cpu/norm.cpp).
// Layout: x, y, dy, dx [R, H] contiguous; w, dw [H]; rstd [R] in A = acc_t<T> (f32, f64 for f64).
// One warp per row (kRowsPerBlock rows per block), 16-byte vector accesses when rows stay aligned,
// fp32 math. The weight gradient is a deterministic two-stage column reduction: blocks of
// kColThreads columns x kRowSplits row slices write partial sums [splits, H], then one thread per
// column adds them in a fixed order into dw. No atomics, so results do not depend on scheduling;
// the cost is a second read of dy and x.
// Backward rule: `+=` into parameter gradients (dw), `=` into activation gradients (dx).
#include <algorithm>

#include "tensor/cuda/common.cuh"

namespace sprig::cuda {

namespace {

constexpr int kRowsPerBlock = 4;
constexpr int kColThreads = 256;
constexpr int64_t kMaxRowSplits = 1024;

template <class T, int N>
__global__ void rms_norm_kernel(const T* __restrict__ x, const T* __restrict__ w, T* __restrict__ y,
                                acc_t<T>* __restrict__ rstd, int64_t rows, int64_t H,
                                acc_t<T> eps) {
  using A = acc_t<T>;
  using V = Vec<T, N>;
  const int64_t row = blockIdx.x * int64_t(kRowsPerBlock) + threadIdx.y;
  if (row >= rows) return;
  const V* xr = reinterpret_cast<const V*>(x + row * H);
  const V* wv = reinterpret_cast<const V*>(w);
  V* yr = reinterpret_cast<V*>(y + row * H);
  A ss = 0;
  for (int64_t p = threadIdx.x; p < H / N; p += 32) {
    const V a = xr[p];
    for (int j = 0; j < N; ++j) ss += to_acc(a.v[j]) * to_acc(a.v[j]);
  }
  const A rs = A(1) / ::sqrt(warp_sum(ss) / A(H) + eps);
  if (threadIdx.x == 0) rstd[row] = rs;
  // HF: the normalised value is cast to x's dtype before the weight multiply.
  for (int64_t p = threadIdx.x; p < H / N; p += 32) {
    const V a = xr[p], b = wv[p];
    V out;
    for (int j = 0; j < N; ++j)
      out.v[j] = from_acc<T>(to_acc(b.v[j]) * round_to<T>(to_acc(a.v[j]) * rs));
    yr[p] = out;
  }
}

// dx = rstd * (dn - n * mean(dn * n)) with n = x * rstd, dn = dy * w.
template <class T, int N>
__global__ void rms_norm_dx_kernel(const T* __restrict__ dy, const T* __restrict__ x,
                                   const T* __restrict__ w, const acc_t<T>* __restrict__ rstd,
                                   T* __restrict__ dx, int64_t rows, int64_t H) {
  using A = acc_t<T>;
  using V = Vec<T, N>;
  const int64_t row = blockIdx.x * int64_t(kRowsPerBlock) + threadIdx.y;
  if (row >= rows) return;
  const V* xr = reinterpret_cast<const V*>(x + row * H);
  const V* dyr = reinterpret_cast<const V*>(dy + row * H);
  const V* wv = reinterpret_cast<const V*>(w);
  V* dxr = reinterpret_cast<V*>(dx + row * H);
  const A rs = rstd[row];
  A dot = 0;
  for (int64_t p = threadIdx.x; p < H / N; p += 32) {
    const V a = xr[p], g = dyr[p], b = wv[p];
    for (int j = 0; j < N; ++j) dot += to_acc(g.v[j]) * to_acc(b.v[j]) * to_acc(a.v[j]) * rs;
  }
  const A mean_dot = warp_sum(dot) / A(H);
  for (int64_t p = threadIdx.x; p < H / N; p += 32) {
    const V a = xr[p], g = dyr[p], b = wv[p];
    V out;
    for (int j = 0; j < N; ++j) {
      const A n = to_acc(a.v[j]) * rs, dn = to_acc(g.v[j]) * to_acc(b.v[j]);
      out.v[j] = from_acc<T>(rs * (dn - n * mean_dot));
    }
    dxr[p] = out;
  }
}

// partial[s, h] = sum over rows r = s, s + splits, ... of dy[r, h] * x[r, h] * rstd[r].
template <class T>
__global__ void rms_norm_dw_partial_kernel(const T* __restrict__ dy, const T* __restrict__ x,
                                           const acc_t<T>* __restrict__ rstd,
                                           acc_t<T>* __restrict__ partial, int64_t rows,
                                           int64_t H) {
  using A = acc_t<T>;
  const int64_t h = blockIdx.x * int64_t(kColThreads) + threadIdx.x;
  if (h >= H) return;
  A acc = 0;
  for (int64_t r = blockIdx.y; r < rows; r += gridDim.y)
    acc += to_acc(dy[r * H + h]) * (to_acc(x[r * H + h]) * rstd[r]);
  partial[blockIdx.y * H + h] = acc;
}

// dw[h] += sum over s of partial[s, h], in a fixed order.
template <class A, class D>
__global__ void rms_norm_dw_reduce_kernel(const A* __restrict__ partial, D* __restrict__ dw,
                                          int64_t splits, int64_t H) {
  const int64_t h = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (h >= H) return;
  A sum = 0;
  for (int64_t s = 0; s < splits; ++s) sum += partial[s * H + h];
  dw[h] = from_acc<D>(static_cast<acc_t<D>>(to_acc(dw[h]) + sum));
}

unsigned row_blocks(int64_t rows) {
  return static_cast<unsigned>((rows + kRowsPerBlock - 1) / kRowsPerBlock);
}

}  // namespace

void rms_norm(const Tensor& x, const Tensor& w, const Tensor& y, const Tensor& rstd, double eps,
              cudaStream_t stream) {
  const int64_t R = x.size(0), H = x.size(1);
  visit_floating(x.dtype(), "rms_norm", [&](auto tag) {
    using T = decltype(tag);
    using A = acc_t<T>;
    const T* xp = static_cast<const T*>(x.data_ptr());
    const T* wp = static_cast<const T*>(w.data_ptr());
    T* yp = static_cast<T*>(y.data_ptr());
    A* rp = static_cast<A*>(rstd.data_ptr());
    with_vec_width<T>(H, {xp, wp, yp}, [&](auto width) {
      constexpr int N = decltype(width)::value;
      launch(rms_norm_kernel<T, N>, row_blocks(R), dim3(32, kRowsPerBlock), 0, stream, xp, wp, yp,
             rp, R, H, A(eps));
    });
  });
  CUDA_CHECK(cudaGetLastError());
}

void rms_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& w, const Tensor& rstd,
                       const Tensor& dx, const Tensor& dw, cudaStream_t stream) {
  const int64_t R = x.size(0), H = x.size(1);
  visit_floating(x.dtype(), "rms_norm_backward", [&](auto tag) {
    using T = decltype(tag);
    using A = acc_t<T>;
    const T* dyp = static_cast<const T*>(dy.data_ptr());
    const T* xp = static_cast<const T*>(x.data_ptr());
    const T* wp = static_cast<const T*>(w.data_ptr());
    const A* rp = static_cast<const A*>(rstd.data_ptr());
    T* dxp = static_cast<T*>(dx.data_ptr());
    with_vec_width<T>(H, {dyp, xp, wp, dxp}, [&](auto width) {
      constexpr int N = decltype(width)::value;
      launch(rms_norm_dx_kernel<T, N>, row_blocks(R), dim3(32, kRowsPerBlock), 0, stream, dyp, xp,
             wp, rp, dxp, R, H);
    });
    CUDA_CHECK(cudaGetLastError());

    // About 2048 blocks in all for stage 1, each row slice at least one row.
    const int64_t col_blocks = (H + kColThreads - 1) / kColThreads;
    const int64_t splits = std::clamp<int64_t>(2048 / col_blocks, 1, std::min(R, kMaxRowSplits));
    const Tensor partial =
        scratch_tensor("rms_norm_backward", {splits, H}, rstd.dtype(), x.device(), stream);
    A* pp = static_cast<A*>(partial.data_ptr());
    launch(rms_norm_dw_partial_kernel<T>,
           dim3(static_cast<unsigned>(col_blocks), static_cast<unsigned>(splits)), kColThreads, 0,
           stream, dyp, xp, rp, pp, R, H);
    CUDA_CHECK(cudaGetLastError());
    const unsigned grid = grid_for(H, kColThreads);
    if (dw.dtype() == DType::f32)
      launch(rms_norm_dw_reduce_kernel<A, float>, grid, kColThreads, 0, stream, pp,
             static_cast<float*>(dw.data_ptr()), splits, H);
    else
      launch(rms_norm_dw_reduce_kernel<A, T>, grid, kColThreads, 0, stream, pp,
             static_cast<T*>(dw.data_ptr()), splits, H);
  });
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace sprig::cuda
