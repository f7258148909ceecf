// CPU RMSNorm with HF numerics, forward and backward. x [R, H] rows, w [H], rstd [R] in
// A = acc_t<T> (f32, f64 for f64). Elements are read in their own dtype (bf16/f16 included) and
// computed in A, so the rounding HF makes to the activation dtype happens here too.
// Backward rule: `+=` into the parameter gradient (dw), `=` into the activation gradient (dx).
#include <algorithm>
#include <cmath>

#include "tensor/cpu/eigen_arrays.h"
#include "tensor/cpu/kernels.h"
#include "tensor/cpu/strided.h"

namespace sprig::cpu {

void rms_norm(const Tensor& x, const Tensor& w, const Tensor& y, const Tensor& rstd, double eps) {
  const int64_t R = x.size(0), H = x.size(1);
  visit_floating(x.dtype(), "rms_norm", [&](auto tag) {
    using T = decltype(tag);
    using A = acc_t<T>;
    const T* xp = x.data<T>();
    const T* wp = w.data<T>();
    T* yp = y.data<T>();
    A* rp = rstd.data<A>();
#pragma omp parallel for if (R * H > kParallelGrain)
    for (int64_t r = 0; r < R; ++r) {
      const T* xr = xp + r * H;
      A ss = 0;
#pragma omp simd reduction(+ : ss)  // a vectorised sum (its order differs from a serial one)
      for (int64_t h = 0; h < H; ++h) ss += convert<A>(xr[h]) * convert<A>(xr[h]);
      const A rs = A(1) / std::sqrt(ss / A(H) + A(eps));
      rp[r] = rs;
      // HF: the normalised value is cast to x's dtype before the weight multiply.
      for (int64_t h = 0; h < H; ++h)
        yp[r * H + h] = convert<T>(convert<A>(wp[h]) * round_to<T>(convert<A>(xr[h]) * rs));
    }
  });
}

void rms_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& w, const Tensor& rstd,
                       const Tensor& dx, const Tensor& dw) {
  const int64_t R = x.size(0), H = x.size(1);
  visit_floating(x.dtype(), "rms_norm_backward", [&](auto tag) {
    using T = decltype(tag);
    using A = acc_t<T>;
    const T* dyp = dy.data<T>();
    const T* xp = x.data<T>();
    const T* wp = w.data<T>();
    const A* rp = rstd.data<A>();
    T* dxp = dx.data<T>();
    // dx = rstd * (dn - n * mean(dn * n)) with n = x * rstd, dn = dy * w; dw += sum over rows of
    // dy * n. Each fixed block of rows sums its share of dw into its own partial while its rows
    // are in cache; the partials are added in block order, so dw is deterministic whatever the
    // thread count.
    constexpr int64_t kRows = 16;
    const int64_t blocks = (R + kRows - 1) / kRows;
    ScratchBuffer<A> partials(static_cast<size_t>(blocks * H), A(0));
#pragma omp parallel for if (R * H > kParallelGrain)
    for (int64_t block = 0; block < blocks; ++block) {
      A* dw_share = partials.data() + block * H;
      for (int64_t r = block * kRows; r < std::min(R, (block + 1) * kRows); ++r) {
        const T* xr = xp + r * H;
        const T* dyr = dyp + r * H;
        const A rs = rp[r];
        A dot = 0;
#pragma omp simd reduction(+ : dot)
        for (int64_t h = 0; h < H; ++h)
          dot += convert<A>(dyr[h]) * convert<A>(wp[h]) * convert<A>(xr[h]) * rs;
        const A mean_dot = dot / A(H);
#pragma omp simd
        for (int64_t h = 0; h < H; ++h) {
          const A n = convert<A>(xr[h]) * rs, dyh = convert<A>(dyr[h]);
          dxp[r * H + h] = convert<T>(rs * (dyh * convert<A>(wp[h]) - n * mean_dot));
          dw_share[h] += dyh * n;
        }
      }
    }
    visit_floating(dw.dtype(), "rms_norm_backward", [&](auto dw_tag) {
      using D = decltype(dw_tag);
      D* dwp = dw.data<D>();
#pragma omp parallel for simd if (blocks * H > kParallelGrain)
      for (int64_t h = 0; h < H; ++h) {
        A sum = 0;
        for (int64_t block = 0; block < blocks; ++block) sum += partials[block * H + h];
        dwp[h] = convert<D>(convert<A>(dwp[h]) + sum);
      }
    });
  });
}

}  // namespace sprig::cpu
