// CPU RMSNorm (HF numerics), rotary embedding (rotate-half) and SwiGLU, forward and backward.
// Shapes: x [R, H] rows for RMSNorm; x [B, T, nH, D] and pos [B, T] for RoPE; any shape for SwiGLU.
// Elements are read in their own dtype (bf16/f16 included) and computed in A = acc_t<T> (f32, or
// f64 for f64), so the roundings HF makes to the activation dtype happen here too.
// Backward rule: `+=` into parameter gradients (dw), `=` into activation gradients.
#include <algorithm>
#include <cmath>

#include "tensor/cpu/kernels.h"
#include "tensor/cpu/strided.h"

namespace sprig::cpu {

namespace {

// v rounded to T's precision, kept in the compute type A (identity for f32/f64).
template <class T, class A> A round_to(A v) { return convert<A>(convert<T>(v)); }

template <class A> A sigmoid(A v) { return A(1) / (A(1) + std::exp(-v)); }

}  // namespace

// ---- RMSNorm ------------------------------------------------------------------------------------

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
    // dx = rstd * (dn - n * mean(dn * n)) with n = x * rstd, dn = dy * w.
#pragma omp parallel for if (R * H > kParallelGrain)
    for (int64_t r = 0; r < R; ++r) {
      const T* xr = xp + r * H;
      const T* dyr = dyp + r * H;
      A dot = 0;
      for (int64_t h = 0; h < H; ++h)
        dot += convert<A>(dyr[h]) * convert<A>(wp[h]) * convert<A>(xr[h]) * rp[r];
      const A mean_dot = dot / A(H);
      for (int64_t h = 0; h < H; ++h) {
        const A n = convert<A>(xr[h]) * rp[r];
        const A dn = convert<A>(dyr[h]) * convert<A>(wp[h]);
        dxp[r * H + h] = convert<T>(rp[r] * (dn - n * mean_dot));
      }
    }
    // dw += sum over rows of dy * n. Each thread owns a block of whole columns, so the sums are
    // deterministic whatever the thread count.
    constexpr int64_t kCols = 64;
    visit_floating(dw.dtype(), "rms_norm_backward", [&](auto dw_tag) {
      using D = decltype(dw_tag);
      D* dwp = dw.data<D>();
#pragma omp parallel for if (R * H > kParallelGrain)
      for (int64_t h0 = 0; h0 < H; h0 += kCols) {
        const int64_t h1 = std::min(H, h0 + kCols);
        A acc[kCols] = {};
        for (int64_t r = 0; r < R; ++r)
          for (int64_t h = h0; h < h1; ++h)
            acc[h - h0] += convert<A>(dyp[r * H + h]) * (convert<A>(xp[r * H + h]) * rp[r]);
        for (int64_t h = h0; h < h1; ++h) dwp[h] = convert<D>(convert<A>(dwp[h]) + acc[h - h0]);
      }
    });
  });
}

// ---- rotary embedding ---------------------------------------------------------------------------

std::vector<float> rope_inv_freq(int64_t head_dim, double theta) {
  // torch: 1.0 / (theta ** (arange(0, D, 2).float() / D)), every step in fp32 (the power is
  // evaluated in f64 and rounded, i.e. a correctly rounded fp32 pow).
  const double base = static_cast<float>(theta);
  std::vector<float> inv_freq(head_dim / 2);
  for (int64_t i = 0; i < head_dim / 2; ++i) {
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(head_dim);
    inv_freq[i] = 1.0f / static_cast<float>(std::pow(base, static_cast<double>(exponent)));
  }
  return inv_freq;
}

void rope(const Tensor& x, const Tensor& pos, const Tensor& y, double theta, bool inverse) {
  const int64_t tokens = x.size(0) * x.size(1), heads = x.size(2), D = x.size(3), half = D / 2;
  const std::vector<float> inv_freq = rope_inv_freq(D, theta);
  const std::vector<int64_t> positions = pos.to_vector<int64_t>();
  visit_floating(x.dtype(), "rope", [&](auto tag) {
    using T = decltype(tag);
    using A = acc_t<T>;
    const T* xp = x.data<T>();
    T* yp = y.data<T>();
#pragma omp parallel if (x.numel() > kParallelGrain)
    {
      std::vector<A> cosines(half), sines(half);
#pragma omp for
      for (int64_t tok = 0; tok < tokens; ++tok) {
        // HF: freqs = float(pos) * inv_freq in fp32; cos/sin in fp32 (evaluated in f64 and
        // rounded, as the CUDA twin does), then cast to x's dtype.
        for (int64_t i = 0; i < half; ++i) {
          const float freq = static_cast<float>(positions[tok]) * inv_freq[i];
          const A s = round_to<T>(A(static_cast<float>(std::sin(static_cast<double>(freq)))));
          cosines[i] = round_to<T>(A(static_cast<float>(std::cos(static_cast<double>(freq)))));
          sines[i] = inverse ? -s : s;
        }
        for (int64_t h = 0; h < heads; ++h) {
          const int64_t base = (tok * heads + h) * D;
          for (int64_t i = 0; i < half; ++i) {
            const A x1 = convert<A>(xp[base + i]), x2 = convert<A>(xp[base + half + i]);
            yp[base + i] = convert<T>(x1 * cosines[i] - x2 * sines[i]);
            yp[base + half + i] = convert<T>(x2 * cosines[i] + x1 * sines[i]);
          }
        }
      }
    }
  });
}

// ---- SwiGLU -------------------------------------------------------------------------------------

void swiglu(const Tensor& gate, const Tensor& up, const Tensor& out) {
  const int64_t n = gate.numel();
  visit_floating(gate.dtype(), "swiglu", [&](auto tag) {
    using T = decltype(tag);
    using A = acc_t<T>;
    const T* gp = gate.data<T>();
    const T* up_p = up.data<T>();
    T* op = out.data<T>();
#pragma omp parallel for if (n > kParallelGrain)
    for (int64_t i = 0; i < n; ++i) {
      const A g = convert<A>(gp[i]);
      op[i] = convert<T>(g * sigmoid(g) * convert<A>(up_p[i]));
    }
  });
}

void swiglu_backward(const Tensor& gate, const Tensor& up, const Tensor& dout, const Tensor& dgate,
                     const Tensor& dup) {
  const int64_t n = gate.numel();
  visit_floating(gate.dtype(), "swiglu_backward", [&](auto tag) {
    using T = decltype(tag);
    using A = acc_t<T>;
    const T* gp = gate.data<T>();
    const T* up_p = up.data<T>();
    const T* dop = dout.data<T>();
    T* dgp = dgate.data<T>();
    T* dup_p = dup.data<T>();
    // silu'(g) = s * (1 + g * (1 - s)) with s = sigmoid(g).
#pragma omp parallel for if (n > kParallelGrain)
    for (int64_t i = 0; i < n; ++i) {
      const A g = convert<A>(gp[i]), s = sigmoid(g), d = convert<A>(dop[i]);
      dgp[i] = convert<T>(d * convert<A>(up_p[i]) * s * (A(1) + g * (A(1) - s)));
      dup_p[i] = convert<T>(d * g * s);
    }
  });
}

}  // namespace sprig::cpu
