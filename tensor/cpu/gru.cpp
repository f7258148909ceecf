// CPU GRU step after its GEMMs, forward and backward (gates r, z, n as PyTorch's nn.GRU).
// Shapes: gi, gh, dgi, dgh [R, 3G] (column blocks r, z, n); h_prev, h, dh, dh_prev [R, G];
// gates [R, 4G] = [r, z, n, gh_n]; each with unit stride along its columns and any row stride;
// one dtype T read natively, math in A = acc_t<T>.
// The forward works on chunks of a row in A buffers so the exponentials and tanh go through
// Eigen's vectorised functions (within a few ulps of std::exp / std::tanh).
// Backward rule: `=` into dgi, dgh and dh_prev (activation gradients).
#include <algorithm>

// GCC 12 reports false -Wmaybe-uninitialized warnings inside its AVX-512 intrinsics headers; the
// pragma covers those headers, included first by Eigen here.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <Eigen/Core>
#pragma GCC diagnostic pop

#include "tensor/cpu/kernels.h"
#include "tensor/cpu/strided.h"

namespace sprig::cpu {

namespace {

// Columns of a row handled at once (the A buffers stay in L1).
constexpr int64_t kChunk = 256;

template <class A> using ArrayMap = Eigen::Map<Eigen::Array<A, Eigen::Dynamic, 1>>;

// Row `r` of a 2-D tensor of T.
template <class T> T* row_of(const Tensor& t, int64_t r) {
  return t.data<T>() + r * t.strides()[0];
}

}  // namespace

void gru_cell(const Tensor& gi, const Tensor& gh, const Tensor& h_prev, const Tensor& h,
              const Tensor& gates) {
  const int64_t R = h.size(0), G = h.size(1);
  visit_floating(gi.dtype(), "gru_cell", [&](auto tag) {
    using T = decltype(tag);
    using A = acc_t<T>;
#pragma omp parallel for if (R * G > kParallelGrain)
    for (int64_t row = 0; row < R; ++row) {
      const T* x = row_of<T>(gi, row);  // r, z, n blocks
      const T* y = row_of<T>(gh, row);
      const T* prev = row_of<T>(h_prev, row);
      T* hr = row_of<T>(h, row);
      T* g = row_of<T>(gates, row);
      for (int64_t j0 = 0; j0 < G; j0 += kChunk) {
        const int64_t n = std::min(kChunk, G - j0);
        A r[kChunk], z[kChunk], c[kChunk];
        for (int64_t j = 0; j < n; ++j) {
          r[j] = convert<A>(x[j0 + j]) + convert<A>(y[j0 + j]);
          z[j] = convert<A>(x[G + j0 + j]) + convert<A>(y[G + j0 + j]);
        }
        ArrayMap<A>(r, n) = (A(1) + (-ArrayMap<A>(r, n)).exp()).inverse();
        ArrayMap<A>(z, n) = (A(1) + (-ArrayMap<A>(z, n)).exp()).inverse();
        for (int64_t j = 0; j < n; ++j)
          c[j] = convert<A>(x[2 * G + j0 + j]) + r[j] * convert<A>(y[2 * G + j0 + j]);
        ArrayMap<A>(c, n) = ArrayMap<A>(c, n).tanh();
        for (int64_t j = 0; j < n; ++j) {
          hr[j0 + j] = convert<T>((A(1) - z[j]) * c[j] + z[j] * convert<A>(prev[j0 + j]));
          g[j0 + j] = convert<T>(r[j]);
          g[G + j0 + j] = convert<T>(z[j]);
          g[2 * G + j0 + j] = convert<T>(c[j]);
          g[3 * G + j0 + j] = y[2 * G + j0 + j];
        }
      }
    }
  });
}

void gru_cell_backward(const Tensor& dh, const Tensor& h_prev, const Tensor& gates,
                       const Tensor& dgi, const Tensor& dgh, const Tensor& dh_prev) {
  const int64_t R = dh.size(0), G = dh.size(1);
  visit_floating(dh.dtype(), "gru_cell_backward", [&](auto tag) {
    using T = decltype(tag);
    using A = acc_t<T>;
#pragma omp parallel for if (R * G > kParallelGrain)
    for (int64_t row = 0; row < R; ++row) {
      const T* dhr = row_of<T>(dh, row);
      const T* prev = row_of<T>(h_prev, row);
      const T* g = row_of<T>(gates, row);
      T* dx = row_of<T>(dgi, row);
      T* dy = row_of<T>(dgh, row);
      T* dp = row_of<T>(dh_prev, row);
      for (int64_t j = 0; j < G; ++j) {
        const A d = convert<A>(dhr[j]), p = convert<A>(prev[j]);
        const A r = convert<A>(g[j]), z = convert<A>(g[G + j]), n = convert<A>(g[2 * G + j]);
        const A gh_n = convert<A>(g[3 * G + j]);
        const A da_n = d * (A(1) - z) * (A(1) - n * n);
        const A da_r = da_n * gh_n * r * (A(1) - r);
        const A da_z = d * (p - n) * z * (A(1) - z);
        dx[j] = dy[j] = convert<T>(da_r);
        dx[G + j] = dy[G + j] = convert<T>(da_z);
        dx[2 * G + j] = convert<T>(da_n);
        dy[2 * G + j] = convert<T>(da_n * r);
        dp[j] = convert<T>(d * z);
      }
    }
  });
}

}  // namespace sprig::cpu
