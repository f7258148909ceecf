// CUDA GRU step after its GEMMs, forward and backward (twin of tensor/cpu/gru.cpp).
// Layout: gi, gh, dgi, dgh [R, 3G] (column blocks r, z, n); h_prev, h, dh, dh_prev [R, G];
// gates [R, 4G] = [r, z, n, gh_n]; one dtype; unit stride along columns, any row stride. One
// thread handles N adjacent columns j of one row (and their r, z, n columns j, G + j, 2G + j) in
// grid-stride loops, with 16-byte vector accesses when G, every row stride and every pointer
// allow.
// Backward rule: `=` into dgi, dgh and dh_prev (activation gradients).
#include <numeric>

#include "tensor/cuda/common.cuh"

namespace sprig::cuda {

namespace {

constexpr int kThreads = 256;

template <class A> __device__ __forceinline__ A sigmoid(A v) { return A(1) / (A(1) + ::exp(-v)); }

// A matrix of T with `stride` elements between rows.
template <class T> struct Rows {
  T* p;
  int64_t stride;
  __device__ __forceinline__ T* at(int64_t r, int64_t c) const { return p + r * stride + c; }
};

template <class V, class T> __device__ __forceinline__ V load(const T* p) {
  return *reinterpret_cast<const V*>(p);
}
template <class V, class T> __device__ __forceinline__ void store(T* p, const V& v) {
  *reinterpret_cast<V*>(p) = v;
}

template <class T> Rows<T> rows_of(const Tensor& t) {
  return {static_cast<T*>(t.data_ptr()), t.strides()[0]};
}

// The gcd of G and every row stride: the vector width must divide it.
int64_t common_width(int64_t G, std::initializer_list<const Tensor*> ts) {
  int64_t w = G;
  for (const Tensor* t : ts) w = std::gcd(w, t->strides()[0]);
  return w;
}

// h = (1 - z) n + z h_prev with r, z, n from gi and gh; gates = [r, z, n, gh_n]. `vectors` =
// R * G / N.
template <class T, int N>
__global__ void gru_cell_kernel(Rows<const T> gi, Rows<const T> gh, Rows<const T> h_prev, Rows<T> h,
                                Rows<T> gates, int64_t G, int64_t vectors) {
  using A = acc_t<T>;
  using V = Vec<T, N>;
  const int64_t per_row = G / N;
  for (int64_t k = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; k < vectors;
       k += int64_t(gridDim.x) * blockDim.x) {
    const int64_t i = k / per_row, j = (k % per_row) * N;
    const V xr = load<V>(gi.at(i, j)), yr = load<V>(gh.at(i, j));
    const V xz = load<V>(gi.at(i, G + j)), yz = load<V>(gh.at(i, G + j));
    const V xn = load<V>(gi.at(i, 2 * G + j)), yn = load<V>(gh.at(i, 2 * G + j));
    const V p = load<V>(h_prev.at(i, j));
    V ho, ro, zo, no;
    for (int e = 0; e < N; ++e) {
      const A r = sigmoid(to_acc(xr.v[e]) + to_acc(yr.v[e]));
      const A z = sigmoid(to_acc(xz.v[e]) + to_acc(yz.v[e]));
      const A n = ::tanh(to_acc(xn.v[e]) + r * to_acc(yn.v[e]));
      ho.v[e] = from_acc<T>((A(1) - z) * n + z * to_acc(p.v[e]));
      ro.v[e] = from_acc<T>(r);
      zo.v[e] = from_acc<T>(z);
      no.v[e] = from_acc<T>(n);
    }
    store(h.at(i, j), ho);
    store(gates.at(i, j), ro);
    store(gates.at(i, G + j), zo);
    store(gates.at(i, 2 * G + j), no);
    store(gates.at(i, 3 * G + j), yn);
  }
}

// da_n = dh (1 - z)(1 - n^2), da_r = da_n gh_n r (1 - r), da_z = dh (h_prev - n) z (1 - z);
// dgi = [da_r, da_z, da_n], dgh = [da_r, da_z, da_n r], dh_prev = dh z.
template <class T, int N>
__global__ void gru_cell_backward_kernel(Rows<const T> dh, Rows<const T> h_prev,
                                         Rows<const T> gates, Rows<T> dgi, Rows<T> dgh,
                                         Rows<T> dh_prev, int64_t G, int64_t vectors) {
  using A = acc_t<T>;
  using V = Vec<T, N>;
  const int64_t per_row = G / N;
  for (int64_t k = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; k < vectors;
       k += int64_t(gridDim.x) * blockDim.x) {
    const int64_t i = k / per_row, j = (k % per_row) * N;
    const V gr = load<V>(gates.at(i, j)), gz = load<V>(gates.at(i, G + j));
    const V gn = load<V>(gates.at(i, 2 * G + j)), gy = load<V>(gates.at(i, 3 * G + j));
    const V d = load<V>(dh.at(i, j)), p = load<V>(h_prev.at(i, j));
    V dr, dz, dn, dyn, dp;
    for (int e = 0; e < N; ++e) {
      const A de = to_acc(d.v[e]), r = to_acc(gr.v[e]), z = to_acc(gz.v[e]), n = to_acc(gn.v[e]);
      const A da_n = de * (A(1) - z) * (A(1) - n * n);
      dr.v[e] = from_acc<T>(da_n * to_acc(gy.v[e]) * r * (A(1) - r));
      dz.v[e] = from_acc<T>(de * (to_acc(p.v[e]) - n) * z * (A(1) - z));
      dn.v[e] = from_acc<T>(da_n);
      dyn.v[e] = from_acc<T>(da_n * r);
      dp.v[e] = from_acc<T>(de * z);
    }
    store(dgi.at(i, j), dr);
    store(dgi.at(i, G + j), dz);
    store(dgi.at(i, 2 * G + j), dn);
    store(dgh.at(i, j), dr);
    store(dgh.at(i, G + j), dz);
    store(dgh.at(i, 2 * G + j), dyn);
    store(dh_prev.at(i, j), dp);
  }
}

}  // namespace

void gru_cell(const Tensor& gi, const Tensor& gh, const Tensor& h_prev, const Tensor& h,
              const Tensor& gates, cudaStream_t stream) {
  const int64_t R = h.size(0), G = h.size(1);
  const int64_t width = common_width(G, {&gi, &gh, &h_prev, &h, &gates});
  visit_floating(gi.dtype(), "gru_cell", [&](auto tag) {
    using T = decltype(tag);
    const Rows<const T> x = rows_of<const T>(gi), y = rows_of<const T>(gh);
    const Rows<const T> p = rows_of<const T>(h_prev);
    const Rows<T> out = rows_of<T>(h), g = rows_of<T>(gates);
    with_vec_width<T>(width, {x.p, y.p, p.p, out.p, g.p}, [&](auto vec) {
      constexpr int N = decltype(vec)::value;
      const int64_t vectors = R * G / N;
      launch(gru_cell_kernel<T, N>, grid_for(vectors, kThreads), kThreads, 0, stream, x, y, p, out,
             g, G, vectors);
    });
  });
  CUDA_CHECK(cudaGetLastError());
}

void gru_cell_backward(const Tensor& dh, const Tensor& h_prev, const Tensor& gates,
                       const Tensor& dgi, const Tensor& dgh, const Tensor& dh_prev,
                       cudaStream_t stream) {
  const int64_t R = dh.size(0), G = dh.size(1);
  const int64_t width = common_width(G, {&dh, &h_prev, &gates, &dgi, &dgh, &dh_prev});
  visit_floating(dh.dtype(), "gru_cell_backward", [&](auto tag) {
    using T = decltype(tag);
    const Rows<const T> d = rows_of<const T>(dh), p = rows_of<const T>(h_prev);
    const Rows<const T> g = rows_of<const T>(gates);
    const Rows<T> dx = rows_of<T>(dgi), dy = rows_of<T>(dgh), dp = rows_of<T>(dh_prev);
    with_vec_width<T>(width, {d.p, p.p, g.p, dx.p, dy.p, dp.p}, [&](auto vec) {
      constexpr int N = decltype(vec)::value;
      const int64_t vectors = R * G / N;
      launch(gru_cell_backward_kernel<T, N>, grid_for(vectors, kThreads), kThreads, 0, stream, d, p,
             g, dx, dy, dp, G, vectors);
    });
  });
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace sprig::cuda
